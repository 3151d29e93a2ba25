package people_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/interlockhq/interlock/internal/natstest"
	"github.com/interlockhq/interlock/people"
)

// logBuffer collects log lines written from a watch's goroutine.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// configBucket starts a server and returns a new configuration bucket on
// it.
func configBucket(t *testing.T) jetstream.KeyValue {
	t.Helper()
	srv := natstest.StartServer(t, "")
	_, js := natstest.Connect(t, srv.ClientURL())
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "interlock_config", History: 5})
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

func stopLive(t *testing.T, l *people.Live) {
	t.Helper()
	t.Cleanup(func() {
		if err := l.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
}

func TestLoadAndPutRoundTripTheDirectory(t *testing.T) {
	t.Parallel()
	kv := configBucket(t)
	if _, _, err := people.Load(t.Context(), kv); !errors.Is(err, people.ErrNoDirectory) || !strings.Contains(err.Error(), "--people FILE") {
		t.Fatalf("Load of an empty bucket: %v, want ErrNoDirectory saying how to put one", err)
	}
	d, _ := people.Parse([]byte(sample), "people.yaml")
	rev, err := people.Put(t.Context(), kv, d)
	if err != nil {
		t.Fatal(err)
	}
	got, gotRev, err := people.Load(t.Context(), kv)
	if err != nil || gotRev != rev || got.Len() != 3 || got.Name() != "kv interlock_config people" {
		t.Fatalf("Load = %v (rev %d, want %d), %v", got.Name(), gotRev, rev, err)
	}
	if _, err := kv.Put(t.Context(), people.Key, []byte("people: [")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := people.Load(t.Context(), kv); err == nil || !strings.Contains(err.Error(), "kv interlock_config people") {
		t.Fatalf("Load of a bad value: %v", err)
	}
	if _, err := people.Put(t.Context(), kv, nil); err == nil {
		t.Fatal("Put of no directory succeeded")
	}
}

// TestLiveAppliesEveryGoodValueAndRefusesABadOne is the operator's `nats
// kv put interlock_config people`: a new directory is applied without a
// restart; one that does not parse is refused with its revision and
// error in the log, the previous stays, and the next good one clears the
// refusal.
func TestLiveAppliesEveryGoodValueAndRefusesABadOne(t *testing.T) {
	t.Parallel()
	kv := configBucket(t)
	var logs logBuffer
	log := zerolog.New(&logs)
	l := people.NewLive(nil)
	if l.Current() != nil {
		t.Fatal("a Live of nothing holds a directory")
	}
	if err := l.Watch(t.Context(), kv, log); err != nil {
		t.Fatal(err)
	}
	stopLive(t, l)
	if l.Current() != nil || l.Revision() != 0 {
		t.Fatal("an empty bucket gave a directory")
	}
	if err := l.Watch(t.Context(), kv, log); err == nil {
		t.Fatal("a second Watch while watching succeeded")
	}

	rev, err := kv.Put(t.Context(), people.Key, []byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the directory applied", func() bool { return l.Revision() == rev })
	if p, ok := l.Current().ByToken("test"); !ok || p.Name != "ann@example.com" {
		t.Fatalf("ann's token finds %+v, %v", p, ok)
	}

	bad, err := kv.Put(t.Context(), people.Key, []byte("people:\n  - name: ann\n    tokenSha256: "+annHash+"\n  - name: bob\n    tokenSha256: "+annHash+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the bad value refused", func() bool { return l.Refused() != nil })
	if r := l.Refused(); r.Revision != bad || !strings.Contains(r.Err.Error(), "also ann's") {
		t.Fatalf("Refused = %+v", r)
	}
	if l.Revision() != rev || !okOf(l.Current().ByToken("test2")) {
		t.Fatal("the directory in force changed with a refused value")
	}
	line := logs.String()
	if !strings.Contains(line, `"level":"error"`) || !strings.Contains(line, `"revision":`+strconv.FormatUint(bad, 10)) || !strings.Contains(line, "also ann's") {
		t.Errorf("the refusal is not logged at error with its revision and reason:\n%s", line)
	}
	if strings.Contains(line, annHash) || strings.Contains(line, bobHash) {
		t.Errorf("a log line holds a token's hash:\n%s", line)
	}

	if err := kv.Delete(t.Context(), people.Key); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the deletion logged", func() bool { return strings.Contains(logs.String(), "was deleted") })
	if !okOf(l.Current().ByToken("test")) {
		t.Fatal("deleting the key dropped the directory in force")
	}

	good, err := kv.Put(t.Context(), people.Key, []byte("people:\n  - name: carol\n    tokenSha256: "+annHash+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the good value applied", func() bool { return l.Revision() == good })
	if p, ok := l.Current().ByToken("test"); !ok || p.Name != "carol" || okOf(l.Current().ByToken("test2")) || l.Refused() != nil {
		t.Fatalf("after the good value: %+v, bob %v, refused %v", p, okOf(l.Current().ByToken("test2")), l.Refused())
	}
}

// TestLiveJoinsTheBucketWithTheLocalFiles: the older files' people (an
// auth file, a Slack configuration) are joined with the bucket's by name;
// a bucket value that conflicts with them is refused.
func TestLiveJoinsTheBucketWithTheLocalFiles(t *testing.T) {
	t.Parallel()
	kv := configBucket(t)
	l := people.NewLive(nil)
	local, _ := people.New("callers.yaml", []people.Person{{Name: "ann", Roles: []string{"legal"}, TokenSHA256: annHash}}, nil)
	if err := l.SetLocal(local); err != nil {
		t.Fatal(err)
	}
	if !okOf(l.Current().ByToken("test")) {
		t.Fatal("the local directory is not in force")
	}
	if _, err := kv.Put(t.Context(), people.Key, []byte("people:\n  - name: ann\n    slack: U1\n    roles: [supervisor]\n")); err != nil {
		t.Fatal(err)
	}
	if err := l.Watch(t.Context(), kv, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	stopLive(t, l)
	p, ok := l.Current().ByToken("test")
	if !ok || p.Slack != "U1" || !p.Holds("supervisor") || !p.Holds("legal") {
		t.Fatalf("joined ann = %+v, %v", p, ok)
	}
	bad, err := kv.Put(t.Context(), people.Key, []byte("people:\n  - name: ann\n    tokenSha256: "+bobHash+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the conflicting value refused", func() bool { return l.Refused() != nil && l.Refused().Revision == bad })
	if !okOf(l.Current().ByToken("test")) {
		t.Fatal("a refused value changed the directory in force")
	}
	other, _ := people.New("callers.yaml", []people.Person{{Name: "ann", Slack: "U2"}}, nil)
	if err := l.SetLocal(other); err == nil || !strings.Contains(err.Error(), "slack") {
		t.Fatalf("a conflicting local directory: %v", err)
	}
}

func TestFileWatchFollowsTheFileAndRefusesABadChange(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "people.yaml")
	if err := os.WriteFile(file, []byte(sample), 0o600); err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		got []int
	)
	var logs logBuffer
	w := people.NewFileWatch(file, 10*time.Millisecond, func(_ context.Context, b []byte) error {
		d, err := people.Parse(b, file)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		got = append(got, d.Len())
		return nil
	}, zerolog.New(&logs))
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	seen := func(n int) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == n }
	}
	natstest.Eventually(t, "the first read", seen(1))
	if err := os.WriteFile(file, []byte("people: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the bad change logged", func() bool { return strings.Contains(logs.String(), "refused the changed file") })
	// Same size and, likely, the same modification time: still a change.
	if err := os.WriteFile(file, []byte("people: [{name: a}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("people: [{name: b}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, "the good change", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 2 && got[len(got)-1] == 1
	})
	if err := w.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := w.Stop(t.Context()); err != nil {
		t.Fatal("stopping twice:", err)
	}

	bad := people.NewFileWatch(filepath.Join(t.TempDir(), "missing.yaml"), 0, func(context.Context, []byte) error { return nil }, zerolog.Nop())
	if err := bad.Start(t.Context()); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("watching a missing file: %v", err)
	}
}
