package events_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/protocol"
)

// TestAuditKeyIDIsTheEngines checks that readers name a key as the engine
// does when it signs: a record's kid finds its key.
func TestAuditKeyIDIsTheEngines(t *testing.T) {
	t.Parallel()
	k, err := engine.AuditKeyOf([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	if got := protocol.AuditKeyID(k.Key); got != k.ID {
		t.Fatalf("protocol.AuditKeyID = %s, engine's kid %s", got, k.ID)
	}
	parsed, err := protocol.ParseAuditKey(k.String())
	if err != nil || parsed.Kid != k.ID || parsed.PublicKey != k.String() {
		t.Fatalf("ParseAuditKey(%s) = %+v, %v", k, parsed, err)
	}
	pub, err := parsed.Key()
	if err != nil || !pub.Equal(k.Key) {
		t.Fatalf("Key() = %x, %v", pub, err)
	}
}

func TestParseAuditKey(t *testing.T) {
	t.Parallel()
	pub := make(ed25519.PublicKey, ed25519.PublicKeySize)
	for i := range pub {
		pub[i] = byte(i)
	}
	b64 := base64.StdEncoding.EncodeToString(pub)
	kid := protocol.AuditKeyID(pub)
	cases := []struct {
		text    string
		wantErr string
	}{
		{text: b64},
		{text: " " + b64 + "\n"},
		{text: kid + ":" + b64},
		{text: "0000000000000000:" + b64, wantErr: "names kid 0000000000000000, but the key's id is " + kid},
		{text: base64.RawStdEncoding.EncodeToString(pub), wantErr: "is not an Ed25519 public key"},
		{text: base64.StdEncoding.EncodeToString(pub[:31]), wantErr: "give its 32 bytes in standard base64"},
		{text: "", wantErr: "is not an Ed25519 public key"},
	}
	for _, tc := range cases {
		k, err := protocol.ParseAuditKey(tc.text)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseAuditKey(%q) = %+v, %v; want an error saying %q", tc.text, k, err, tc.wantErr)
			}
			continue
		}
		if err != nil || k.Kid != kid || k.PublicKey != b64 {
			t.Errorf("ParseAuditKey(%q) = %+v, %v", tc.text, k, err)
		}
	}
}

func TestDecodeAuditKeys(t *testing.T) {
	t.Parallel()
	pub := make([]byte, ed25519.PublicKeySize)
	pub[0] = 7
	good := protocol.AuditKey{Kid: protocol.AuditKeyID(pub), PublicKey: base64.StdEncoding.EncodeToString(pub), Since: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
	list, _ := json.Marshal([]protocol.AuditKey{good})
	cases := []struct {
		data    string
		wantErr string
	}{
		{data: string(list)},
		{data: `[]`},
		{data: `null`, wantErr: "null, not a list"},
		{data: `{}`, wantErr: "not a JSON list"},
		{data: `[{"kid":"` + good.Kid + `","publicKey":"` + good.PublicKey + `","since":"2026-11-21T10:00:00Z","owner":"x"}]`, wantErr: `unknown field "owner"`},
		{data: `[{"kid":"0000000000000000","publicKey":"` + good.PublicKey + `","since":"2026-11-21T10:00:00Z"}]`, wantErr: "its public key's id is " + good.Kid},
		{data: `[{"kid":"` + good.Kid + `","publicKey":"AAAA","since":"2026-11-21T10:00:00Z"}]`, wantErr: "is not 32 bytes of standard base64"},
		{data: string(list) + ` []`, wantErr: "followed by more JSON"},
	}
	for _, tc := range cases {
		keys, err := protocol.DecodeAuditKeys([]byte(tc.data))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("DecodeAuditKeys(%s) = %v, %v; want an error saying %q", tc.data, keys, err, tc.wantErr)
			}
			continue
		}
		if err != nil || keys == nil {
			t.Errorf("DecodeAuditKeys(%s) = %v, %v", tc.data, keys, err)
		}
	}
}

// FuzzDecodeAuditKeys holds DecodeAuditKeys to what it promises: every
// key it returns is an Ed25519 public key whose id is its kid.
func FuzzDecodeAuditKeys(f *testing.F) {
	f.Add([]byte(`[{"kid":"6bd90a16be8a43ec","publicKey":"+ciERRfmmK/h20+EfwNsSLuRxlpds8KafT9bSZSDeic=","since":"2026-11-21T10:00:00Z"}]`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`[{"kid":"","publicKey":"","since":""}] x`))
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, err := protocol.DecodeAuditKeys(data)
		if err != nil {
			return
		}
		for _, k := range keys {
			pub, err := base64.StdEncoding.DecodeString(k.PublicKey)
			if err != nil || len(pub) != ed25519.PublicKeySize || protocol.AuditKeyID(pub) != k.Kid {
				t.Fatalf("decoded a key that is not one: %+v", k)
			}
		}
	})
}
