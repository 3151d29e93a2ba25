package bus_test

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/engine/enginetest"
	"github.com/interlockhq/interlock/events"
	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/protocol"
)

// deadLetters waits until the inbound stream is drained and returns the
// dead letters, failing unless there are n.
func (r *workerRig) deadLetters(t *testing.T, n int) []natstest.Received {
	t.Helper()
	natstest.WaitDrained(t, r.js, r.names.InStream())
	dead := natstest.Read(t, r.js, r.names.DeadLetterStream(), ">")
	if len(dead) != n {
		t.Fatalf("%d dead letters; want %d", len(dead), n)
	}
	return dead
}

// TestADeadLetterKeepsTheOriginalHeadersUnderAPrefixSoNoneActs: a command
// carrying headers that JetStream acts on (an expected stream and last
// sequence, a message id; the inbound stream refuses the others, such as
// a roll-up) is stored as a
// dead letter with each header, every value, under Interlock-Original-,
// and none acting: the dead letter is written at once, not redelivered.
func TestADeadLetterKeepsTheOriginalHeadersUnderAPrefixSoNoneActs(t *testing.T) {
	t.Parallel()
	r := newWorkerRig(t, enginetest.NewStore(), 2)
	s, err := r.js.Stream(t.Context(), r.names.InStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	sent := nats.Header{
		"Content-Type":                {"text/plain"},
		"Nats-Expected-Stream":        {r.names.InStream()},
		"Nats-Expected-Last-Sequence": {strconv.FormatUint(info.State.LastSeq, 10)},
		"Nats-Msg-Id":                 {"original-id"},
		"X-Trace":                     {"keep-me"},
		"X-Many":                      {"one", "two"},
	}
	natstest.PublishRaw(t, r.js, r.names.In("booking", "start"), []byte("hello"), sent)
	d := r.deadLetters(t, 1)[0]
	if string(d.Data) != "hello" || d.Header.Get(bus.HeaderReason) != events.ReasonUnparseable {
		t.Fatalf("dead letter %q with reason %q", d.Data, d.Header.Get(bus.HeaderReason))
	}
	for k, vs := range sent {
		if got := d.Header.Values(bus.HeaderOriginal + k); strings.Join(got, "|") != strings.Join(vs, "|") {
			t.Errorf("header %s kept as %q, want %q", bus.HeaderOriginal+k, got, vs)
		}
	}
	for k := range d.Header {
		if !strings.HasPrefix(k, "Interlock-") && k != "Nats-Msg-Id" {
			t.Errorf("dead letter has header %s, which is neither Interlock's nor under %s", k, bus.HeaderOriginal)
		}
	}
	if id := d.Header.Get("Nats-Msg-Id"); !strings.HasPrefix(id, "dlq-"+r.names.InStream()+"-") {
		t.Errorf("dead letter's Nats-Msg-Id %q is not its own", id)
	}
}

// TestADeadLetterHoldsNoResumeTokenAndNoVouch: a resume token in a header
// (a binary-mode resume's ce-resumetoken) is redacted like one in the body,
// as is any header that may carry another credential (Authorization, an
// API key, a cookie),
// and Interlock-Vouch, a credential of the deployment's services, is
// dropped, saying so; the approver and roles are kept as information.
func TestADeadLetterHoldsNoResumeTokenAndNoVouch(t *testing.T) {
	t.Parallel()
	r := newWorkerRig(t, enginetest.NewStore(), 2)
	binary := nats.Header{
		"ce-specversion": {"1.0"}, "ce-id": {"b1"}, "ce-source": {"/t"}, "ce-type": {protocol.TypeResume},
		"ce-subject": {"r-bin"}, "ce-time": {"yesterday"}, "ce-resumetoken": {"LIVE-TOKEN-1"},
		"Resume-Token": {"LIVE-TOKEN-2"}, "Authorization": {"Bearer LIVE-TOKEN-4"}, "X-Api-Key": {"LIVE-TOKEN-5"},
		"Cookie": {"session=LIVE-TOKEN-6"},
	}
	natstest.PublishRaw(t, r.js, r.names.In("booking", "resume"), []byte(`{"answers":{}}`), binary)
	vouched := nats.Header{
		"Content-Type":          {events.Structured},
		protocol.HeaderVouch:    {"FORGED-VOUCH"},
		protocol.HeaderApprover: {"ann"},
		protocol.HeaderRoles:    {"ops,finance"},
	}
	natstest.PublishRaw(t, r.js, r.names.In("booking", "resume"),
		[]byte(`{"specversion":"1.0","id":"b2","source":"/t","type":"io.interlock.run.resume","subject":"r-vouch","data":{"resumeToken":"LIVE-TOKEN-3"}}`), vouched)
	dead := r.deadLetters(t, 2)
	for _, d := range dead {
		for k, vs := range d.Header {
			for _, v := range vs {
				if strings.Contains(v, "LIVE-TOKEN") || strings.Contains(v, "FORGED-VOUCH") {
					t.Errorf("dead letter of %s keeps a credential in header %s: %q", d.Header.Get(bus.HeaderSubject), k, v)
				}
			}
		}
		if strings.Contains(string(d.Data), "LIVE-TOKEN") {
			t.Errorf("dead letter body holds a token: %s", d.Data)
		}
		for k := range d.Header {
			if strings.Contains(k, protocol.HeaderVouch) {
				t.Errorf("dead letter keeps header %s", k)
			}
		}
	}
	byRun := map[string]natstest.Received{}
	for _, d := range dead {
		byRun[d.Header.Get(bus.HeaderOriginal+"ce-subject")+d.Header.Get(bus.HeaderOriginal+protocol.HeaderApprover)] = d
	}
	b := byRun["r-bin"]
	for _, k := range []string{"ce-resumetoken", "Resume-Token", "Authorization", "X-Api-Key", "Cookie"} {
		if b.Header.Get(bus.HeaderOriginal+k) != events.Redacted {
			t.Errorf("binary resume's %s header: %q in the dead letter, want it redacted", k, b.Header.Get(bus.HeaderOriginal+k))
		}
	}
	if b.Header.Get(bus.HeaderOriginal+"ce-id") != "b1" {
		t.Errorf("binary resume's ce-id not kept: %v", b.Header)
	}
	v := byRun["ann"]
	if v.Header.Get(bus.HeaderOriginal+protocol.HeaderRoles) != "ops,finance" || !strings.Contains(v.Header.Get(bus.HeaderDropped), protocol.HeaderVouch) {
		t.Errorf("vouched resume's dead letter: %v; want the roles kept and the vouch named as dropped", v.Header)
	}
}

// TestADeadLetterOfAMessageAsLargeAsTheServerTakesStores: the dead
// letter's own headers do not fit beside a body at the server's
// max_payload, so it keeps as much of the body (redacted first) as fits,
// saying how large the whole was and its SHA-256. A smaller body is kept
// whole.
func TestADeadLetterOfAMessageAsLargeAsTheServerTakesStores(t *testing.T) {
	t.Parallel()
	r := newWorkerRig(t, enginetest.NewStore(), 2)
	limit := int(r.js.Conn().MaxPayload())
	header := nats.Header{"Content-Type": {"text/plain"}, "X-Note": {"big"}}
	probe := nats.NewMsg(r.names.In("booking", "start"))
	probe.Header = header
	room := limit - (probe.Size() - len(probe.Subject)) // what the body may take
	// Not JSON (it never closes), so redacted by pattern.
	body := func(n int) []byte {
		head := `{"resumeToken":"LIVE-TOKEN-4","pad":"`
		return []byte(head + strings.Repeat("p", n-len(head)))
	}
	sizes := []int{512 << 10, room - 300, room}
	for _, n := range sizes {
		natstest.PublishRaw(t, r.js, r.names.In("booking", "start"), body(n), header)
	}
	dead := r.deadLetters(t, len(sizes))
	// In the order they were sent.
	slices.SortFunc(dead, func(a, b natstest.Received) int {
		x, _ := strconv.Atoi(a.Header.Get(bus.HeaderStreamSeq))
		y, _ := strconv.Atoi(b.Header.Get(bus.HeaderStreamSeq))
		return x - y
	})
	for i, d := range dead {
		whole := body(sizes[i])
		redacted := events.RedactTokens(whole)
		dl := nats.NewMsg(d.Subject)
		dl.Header, dl.Data = d.Header, d.Data
		if size := dl.Size() - len(dl.Subject); size > limit {
			t.Errorf("dead letter of %d bytes is %d bytes, more than max_payload %d", sizes[i], size, limit)
		}
		if strings.Contains(string(d.Data), "LIVE-TOKEN") || !strings.HasPrefix(string(redacted), string(d.Data)) {
			t.Errorf("dead letter of %d bytes does not begin the redacted body: %.80s", sizes[i], d.Data)
		}
		if i == 0 {
			if string(d.Data) != string(redacted) || d.Header.Get(bus.HeaderTruncated) != "" {
				t.Errorf("a body of %d bytes was not kept whole (%d bytes, %s %q)", sizes[i], len(d.Data), bus.HeaderTruncated, d.Header.Get(bus.HeaderTruncated))
			}
			continue
		}
		sum := sha256.Sum256(whole)
		if d.Header.Get(bus.HeaderTruncated) != strconv.Itoa(len(whole)) || d.Header.Get(bus.HeaderBodySHA256) != hex.EncodeToString(sum[:]) {
			t.Errorf("dead letter of %d bytes, cut to %d: %s %q, %s %q", sizes[i], len(d.Data),
				bus.HeaderTruncated, d.Header.Get(bus.HeaderTruncated), bus.HeaderBodySHA256, d.Header.Get(bus.HeaderBodySHA256))
		}
		if len(d.Data) < len(redacted)-4096 {
			t.Errorf("dead letter of %d bytes keeps only %d", sizes[i], len(d.Data))
		}
	}
}

// TestADeadLetterOfHeadersAsLargeAsJetStreamTakesStores: a stream takes
// at most 64 KiB of a message's headers; original headers that do not fit
// beside the dead letter's own are dropped, and named.
func TestADeadLetterOfHeadersAsLargeAsJetStreamTakesStores(t *testing.T) {
	t.Parallel()
	r := newWorkerRig(t, enginetest.NewStore(), 2)
	const maxHeaders = 65535 // JetStream's limit
	header := nats.Header{"X-Small": {"kept"}, "X-Huge": {""}}
	probe := nats.NewMsg(r.names.In("booking", "start"))
	probe.Header = header
	header.Set("X-Huge", strings.Repeat("h", maxHeaders-(probe.Size()-len(probe.Subject))))
	body := []byte(strings.Repeat("b", 900<<10))
	natstest.PublishRaw(t, r.js, r.names.In("booking", "start"), body, header)
	d := r.deadLetters(t, 1)[0]
	if d.Header.Get(bus.HeaderOriginal+"X-Small") != "kept" || d.Header.Get(bus.HeaderOriginal+"X-Huge") != "" ||
		d.Header.Get(bus.HeaderDropped) != "X-Huge" || string(d.Data) != string(body) {
		t.Fatalf("dead letter of %d bytes with headers %v; want the body whole, X-Small kept, X-Huge dropped and named", len(d.Data), d.Header)
	}
}
