package notify

import (
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
