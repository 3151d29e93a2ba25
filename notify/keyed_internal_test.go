package notify

import (
	"fmt"
	"sync"
	"testing"
)

// TestAKeyedMutexSerializesOneKeyAndForgetsItOnceFree: holders of one
// key take turns, and the mutex keeps nothing once no one holds a key.
func TestAKeyedMutexSerializesOneKeyAndForgetsItOnceFree(t *testing.T) {
	var k keyedMutex
	var wg sync.WaitGroup
	inside, most := 0, 0
	var mu sync.Mutex
	for range 8 {
		wg.Go(func() {
			defer k.lock("a")()
			mu.Lock()
			inside++
			most = max(most, inside)
			mu.Unlock()
			unlockB := k.lock("b") // another key is not held back
			unlockB()
			mu.Lock()
			inside--
			mu.Unlock()
		})
	}
	wg.Wait()
	if most != 1 {
		t.Errorf("%d holders of one key at once, want 1", most)
	}
	if len(k.keys) != 0 {
		t.Errorf("%d keys kept once free, want none", len(k.keys))
	}
}

// TestARunsTurnsComeInTheOrderTheyWereTaken: a run's turns start in the
// order they were taken, each once the one before is done; another run's
// turn does not wait; nothing is kept once every turn is done.
func TestARunsTurnsComeInTheOrderTheyWereTaken(t *testing.T) {
	var tu turns
	first, second, other := tu.take("ev.refund.r-1"), tu.take("ev.refund.r-1"), tu.take("ev.refund.r-2")
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	var wg sync.WaitGroup
	started := make(chan struct{})
	wg.Go(func() {
		close(started)
		done := second()
		note("second")
		done()
	})
	<-started
	doneOther := other() // r-2 waits on nothing
	note("other")
	doneOther()
	doneFirst := first()
	note("first")
	doneFirst()
	wg.Wait()
	if got := fmt.Sprint(order); got != "[other first second]" {
		t.Errorf("turns in the order %s, want [other first second]", got)
	}
	if len(tu.last) != 0 {
		t.Errorf("%d runs kept once their turns are done, want none", len(tu.last))
	}
}
