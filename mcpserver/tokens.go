package mcpserver

import (
	"sync"

	"github.com/interlockhq/interlock/protocol"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxTokensPerSession bounds the interrupts one session remembers: the
// oldest is forgotten first.
const maxTokensPerSession = 1000

// tokens keeps the resume token of each interrupt a session has seen,
// bound to that session: a session continues only the runs it has seen
// waiting. A session's tokens are forgotten when it ends.
type tokens struct {
	mu       sync.Mutex
	sessions map[*mcp.ServerSession]*sessionTokens
	// ends are the goroutines that forget a session's tokens when it
	// ends.
	ends sync.WaitGroup
}

type sessionTokens struct {
	byRun map[string]protocol.Interrupted
	order []string
}

func newTokens() *tokens {
	return &tokens{sessions: map[*mcp.ServerSession]*sessionTokens{}}
}

// keep remembers in, the interrupt a run of the session now waits on.
func (t *tokens) keep(ss *mcp.ServerSession, in protocol.Interrupted) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.sessions[ss]
	if st == nil {
		st = &sessionTokens{byRun: map[string]protocol.Interrupted{}}
		t.sessions[ss] = st
		if ss != nil {
			// The session's owner (the SDK, or Server.Close) ends it;
			// the goroutine ends with it.
			t.ends.Go(func() {
				_ = ss.Wait()
				t.mu.Lock()
				delete(t.sessions, ss)
				t.mu.Unlock()
			})
		}
	}
	key := in.Flow + "." + in.Run
	if _, ok := st.byRun[key]; !ok {
		st.order = append(st.order, key)
		if len(st.order) > maxTokensPerSession {
			delete(st.byRun, st.order[0])
			st.order = st.order[1:]
		}
	}
	st.byRun[key] = in
}

// get returns the interrupt the session last saw a run wait on.
func (t *tokens) get(ss *mcp.ServerSession, flow, run string) (protocol.Interrupted, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.sessions[ss]
	if st == nil {
		return protocol.Interrupted{}, false
	}
	in, ok := st.byRun[flow+"."+run]
	return in, ok
}

// wait waits until every session seen has ended and been forgotten.
func (t *tokens) wait() { t.ends.Wait() }
