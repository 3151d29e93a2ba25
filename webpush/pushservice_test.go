package webpush_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/interlockhq/interlock/notify/channeltest"
	"github.com/interlockhq/interlock/webpush"
)

// device is a browser's push subscription: the key pair and auth secret
// notices are encrypted to.
type device struct {
	name string
	key  *ecdh.PrivateKey
	auth []byte
}

func newDevice(t *testing.T, name string) *device {
	t.Helper()
	key, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, 16)
	_, _ = rand.Read(auth)
	return &device{name: name, key: key, auth: auth}
}

// subscription is the device's PushSubscription JSON at endpoint.
func (d *device) subscription(endpoint string) []byte {
	b, _ := json.Marshal(map[string]any{"endpoint": endpoint, "keys": map[string]string{
		"p256dh": base64.RawURLEncoding.EncodeToString(d.key.PublicKey().Bytes()),
		"auth":   base64.RawURLEncoding.EncodeToString(d.auth)}})
	return b
}

// decrypt opens an aes128gcm body encrypted to the device (RFC 8291,
// RFC 8188): one record, padding delimited by 0x02.
func (d *device) decrypt(body []byte) ([]byte, error) {
	if len(body) < 21 {
		return nil, errors.New("shorter than the aes128gcm header")
	}
	salt, rs, idlen := body[:16], binary.BigEndian.Uint32(body[16:20]), int(body[20])
	if len(body) < 21+idlen || rs < 18 {
		return nil, errors.New("a bad aes128gcm header")
	}
	asPublic, ciphertext := body[21:21+idlen], body[21+idlen:]
	peer, err := ecdh.P256().NewPublicKey(asPublic)
	if err != nil {
		return nil, fmt.Errorf("the key id is not the sender's P-256 key: %w", err)
	}
	secret, err := d.key.ECDH(peer)
	if err != nil {
		return nil, err
	}
	info := append(append([]byte("WebPush: info\x00"), d.key.PublicKey().Bytes()...), asPublic...)
	ikm, err := hkdf.Key(sha256.New, secret, d.auth, string(info), 32)
	if err != nil {
		return nil, err
	}
	cek, err := hkdf.Key(sha256.New, ikm, salt, "Content-Encoding: aes128gcm\x00", 16)
	if err != nil {
		return nil, err
	}
	nonce, err := hkdf.Key(sha256.New, ikm, salt, "Content-Encoding: nonce\x00", 12)
	if err != nil {
		return nil, err
	}
	block, _ := aes.NewCipher(cek)
	gcm, _ := cipher.NewGCM(block)
	plain, err := gcm.Open(nil, nonce, ciphertext, nil)
	if err != nil {
		return nil, fmt.Errorf("the record does not decrypt: %w", err)
	}
	end := bytes.LastIndexFunc(plain, func(r rune) bool { return r != 0 })
	if end < 0 || plain[end] != 2 {
		return nil, errors.New("the last record has no 0x02 padding delimiter")
	}
	return plain[:end], nil
}

// checkVAPID checks a request's Authorization (RFC 8292): a JWT signed
// ES256 with the key it names, for the push service's origin, with a
// contact, not expired. It returns the key.
func checkVAPID(r *http.Request, origin string) (string, error) {
	h := r.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(h, "vapid t=")
	if !ok {
		return "", fmt.Errorf("authorization %q is not vapid", h)
	}
	token, k, ok := strings.Cut(rest, ", k=")
	if !ok {
		return "", errors.New("no k= in the vapid authorization")
	}
	raw, err := base64.RawURLEncoding.DecodeString(k)
	if err != nil || len(raw) != 65 {
		return "", errors.New("k is not an uncompressed P-256 key")
	}
	pub := &ecdsa.PublicKey{Curve: elliptic.P256(), X: new(big.Int).SetBytes(raw[1:33]), Y: new(big.Int).SetBytes(raw[33:])}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", errors.New("the token is no JWT")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return "", errors.New("the signature is not ES256's")
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(pub, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return "", errors.New("the JWT's signature does not verify with k")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", err
	}
	var claims struct {
		Aud string `json:"aud"`
		Exp int64  `json:"exp"`
		Sub string `json:"sub"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return "", err
	}
	switch {
	case claims.Aud != origin:
		return "", fmt.Errorf("aud %q, want %q", claims.Aud, origin)
	case claims.Exp < time.Now().Unix() || claims.Exp > time.Now().Add(24*time.Hour).Unix():
		return "", fmt.Errorf("exp %d is not within the next 24 hours", claims.Exp)
	case !strings.HasPrefix(claims.Sub, "mailto:") && !strings.HasPrefix(claims.Sub, "https://"):
		return "", fmt.Errorf("sub %q is no contact", claims.Sub)
	}
	return k, nil
}

// pushed is a notice the push service took, decrypted.
type pushed struct {
	Endpoint string
	Payload  webpush.Payload
	Header   http.Header
	VAPIDKey string
}

// pushService is a push service on loopback (TLS): it takes a notice
// for each device subscribed at it, checks its VAPID signature, and
// decrypts it. It can be told to answer a device otherwise.
type pushService struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	devices  map[string]*device
	answers  map[string]channeltest.Answer
	status   map[string]int
	got      []pushed
	released chan struct{}
}

func startPushService(t *testing.T) *pushService {
	t.Helper()
	p := &pushService{t: t, devices: map[string]*device{}, answers: map[string]channeltest.Answer{}, status: map[string]int{}, released: make(chan struct{})}
	p.srv = httptest.NewTLSServer(http.HandlerFunc(p.serve))
	t.Cleanup(func() {
		p.answer("", channeltest.Accept)
		p.srv.Close()
	})
	return p
}

// add subscribes a device of name here, and returns its endpoint and its
// subscription's JSON.
func (p *pushService) add(name string) (string, []byte) {
	p.t.Helper()
	d := newDevice(p.t, name)
	endpoint := p.srv.URL + "/push/" + name
	p.mu.Lock()
	p.devices[endpoint] = d
	p.mu.Unlock()
	return endpoint, d.subscription(endpoint)
}

// answer sets how endpoint is answered ("": every one) and lets go of
// the requests held.
func (p *pushService) answer(endpoint string, a channeltest.Answer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if endpoint == "" {
		clear(p.answers)
	} else {
		p.answers[endpoint] = a
	}
	close(p.released)
	p.released = make(chan struct{})
}

// answerStatus makes endpoint answered with code.
func (p *pushService) answerStatus(endpoint string, code int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status[endpoint] = code
}

func (p *pushService) serve(w http.ResponseWriter, r *http.Request) {
	endpoint := p.srv.URL + r.URL.Path
	for {
		p.mu.Lock()
		a, released := p.answers[endpoint], p.released
		p.mu.Unlock()
		if a != channeltest.Hang {
			break
		}
		select {
		case <-released:
		case <-r.Context().Done():
			return
		}
	}
	p.mu.Lock()
	d, a, code := p.devices[endpoint], p.answers[endpoint], p.status[endpoint]
	p.mu.Unlock()
	switch {
	case d == nil:
		http.Error(w, "no such subscription", http.StatusNotFound)
		return
	case code != 0:
		w.WriteHeader(code)
		return
	case a == channeltest.Fail:
		http.Error(w, "try later", http.StatusServiceUnavailable)
		return
	case a == channeltest.Throttle:
		w.Header().Set("Retry-After", fmt.Sprint(int(channeltest.ThrottleFor/time.Second)))
		w.WriteHeader(http.StatusTooManyRequests)
		return
	case a == channeltest.Refuse:
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	k, err := checkVAPID(r, p.srv.URL)
	if err != nil {
		p.t.Errorf("push service: %v", err)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	if r.Header.Get("Content-Encoding") != "aes128gcm" || r.Header.Get("TTL") == "" {
		p.t.Errorf("push service: Content-Encoding %q, TTL %q", r.Header.Get("Content-Encoding"), r.Header.Get("TTL"))
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 8192))
	plain, err := d.decrypt(body)
	if err != nil {
		p.t.Errorf("push service: %v", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var pl webpush.Payload
	if err := json.Unmarshal(plain, &pl); err != nil {
		p.t.Errorf("push service: the notice is not a payload: %v: %s", err, plain)
	}
	p.mu.Lock()
	p.got = append(p.got, pushed{Endpoint: endpoint, Payload: pl, Header: r.Header.Clone(), VAPIDKey: k})
	p.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
}

// received is what the push service took, in order.
func (p *pushService) received() []pushed {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]pushed(nil), p.got...)
}
