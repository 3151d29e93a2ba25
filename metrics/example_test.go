package metrics_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"

	interlock "github.com/interlockhq/interlock"
	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/metrics"
)

// A service with its metrics on a loopback port: a refund waits for a
// supervisor, and the pending gauge, read from the pending index, says so.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "interlock-metrics-example")
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()

	// The pending gauges are counted from the pending index every
	// PendingEvery (15 s by default); every second here.
	m, err := metrics.New(metrics.Config{Addr: "127.0.0.1:0", PendingEvery: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	svc, err := interlock.Start(ctx, interlock.Config{
		Flows:    []*engine.Flow{refund.Flow()},
		Embedded: &bus.ServerConfig{DataDir: dir, Port: -1, LazyFsync: true},
		Observe:  m.Observe,
		Services: []interlock.Background{m},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = svc.Stop(ctx) }()

	state := map[string]json.RawMessage{"orderId": json.RawMessage(`"o-1"`), "amount": json.RawMessage(`4800`), "last4": json.RawMessage(`"4821"`)}
	if _, err := svc.Client("/examples/metrics").Start(ctx, refund.Name, "r-example", state, nil); err != nil {
		log.Fatal(err)
	}
	base := "http://" + m.Addr()
	fmt.Println("readyz:", body(base+"/readyz"))
	fmt.Println(waitForLine(base+"/metrics", `interlock_pending_interrupts{approver_role="supervisor"`))
	// Output:
	// readyz: {"ready":true}
	// interlock_pending_interrupts{approver_role="supervisor",flow="refund",kind="approval"} 1
}

func body(url string) string {
	resp, err := httpClient.Get(url)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		log.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// waitForLine scrapes url until a line starts with prefix: the watcher
// of the pending index hears of the run a moment after it waits.
func waitForLine(url, prefix string) string {
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		sc := bufio.NewScanner(strings.NewReader(body(url)))
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), prefix) {
				return sc.Text()
			}
		}
		<-tick.C
	}
	return "no line " + prefix
}

// The endpoint refuses an address beyond loopback unless told the metrics
// may be read by anyone who reaches it.
func ExampleNew() {
	_, err := metrics.New(metrics.Config{Addr: "0.0.0.0:9090"})
	fmt.Println(err != nil)
	m, err := metrics.New(metrics.Config{Addr: "0.0.0.0:9090", InsecurePublic: true})
	fmt.Println(m != nil, err)
	// Output:
	// true
	// true <nil>
}
