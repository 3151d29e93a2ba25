package a2aserver

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/protocol"
)

// handler answers the A2A methods from the asks in JetStream: it keeps
// nothing of its own.
type handler struct{ s *Server }

var _ a2asrv.RequestHandler = handler{}

// OnSendMessage makes the message an ask. A blocking send (the default)
// waits up to Config.Wait for the answer; otherwise it returns once
// people are asked.
func (h handler) OnSendMessage(ctx context.Context, p *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	c, cl, req, err := h.ask(ctx, p)
	if err != nil {
		return nil, err
	}
	var ans client.AskAnswer
	if p.Config == nil || p.Config.Blocking == nil || *p.Config.Blocking {
		ans, err = cl.Ask(ctx, req, h.s.cfg.Wait)
	} else {
		ans, err = cl.AskNoWait(ctx, req, h.s.cfg.Wait)
	}
	if err != nil && !errors.Is(err, client.ErrNoAnswer) {
		return nil, h.s.failed(c, "asking", err)
	}
	return taskOf(req.AskID, ans), nil
}

// OnSendMessageStream makes the message an ask and follows it: the task,
// then its artifact and final status once people answer.
func (h handler) OnSendMessageStream(ctx context.Context, p *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		c, cl, req, err := h.ask(ctx, p)
		if err != nil {
			yield(nil, err)
			return
		}
		ans, err := cl.AskNoWait(ctx, req, h.s.cfg.Wait)
		if err != nil && !errors.Is(err, client.ErrNoAnswer) {
			yield(nil, h.s.failed(c, "asking", err))
			return
		}
		h.follow(ctx, c, cl, taskOf(req.AskID, ans), yield)
	}
}

// ask checks a message and makes it an ask of the caller.
func (h handler) ask(ctx context.Context, p *a2a.MessageSendParams) (authority.Caller, *client.Client, protocol.AskRequest, error) {
	c, err := callerOf(ctx)
	if err != nil {
		return c, nil, protocol.AskRequest{}, err
	}
	if p == nil {
		return c, nil, protocol.AskRequest{}, fmt.Errorf("%w: params are missing", a2a.ErrInvalidParams)
	}
	req, err := askOf(c, p.Message)
	if err != nil {
		return c, nil, req, err
	}
	if p.Config != nil && p.Config.PushConfig != nil {
		// Kept before the ask is sent: its answer finds it.
		if _, err := h.s.setPush(ctx, c, a2a.TaskID(req.AskID), *p.Config.PushConfig); err != nil {
			return c, nil, req, err
		}
	}
	cl, err := h.s.client(c, h.s.cfg.Wait)
	return c, cl, req, err
}

// OnGetTask reads the task: the ask as it stands.
func (h handler) OnGetTask(ctx context.Context, q *a2a.TaskQueryParams) (*a2a.Task, error) {
	if q == nil {
		return nil, fmt.Errorf("%w: params are missing: send {\"id\": \"<task id>\"}", a2a.ErrInvalidParams)
	}
	c, cl, err := h.task(ctx, q.ID)
	if err != nil {
		return nil, err
	}
	ans, err := cl.WaitAsk(ctx, string(q.ID), time.Millisecond)
	if err != nil && !errors.Is(err, client.ErrNoAnswer) {
		return nil, h.s.failed(c, "reading the task", err)
	}
	return taskOf(string(q.ID), ans), nil
}

// OnCancelTask cancels the ask, as the caller: the one authority decides
// whether it may.
func (h handler) OnCancelTask(ctx context.Context, p *a2a.TaskIDParams) (*a2a.Task, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: params are missing: send {\"id\": \"<task id>\"}", a2a.ErrInvalidParams)
	}
	c, cl, err := h.task(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	ev, err := cl.Cancel(ctx, protocol.AskFlow, string(p.ID), "cancelled by its A2A client, "+c.Name)
	if err != nil {
		return nil, h.s.failed(c, "cancelling the task", err)
	}
	if ev.Kind == protocol.EventRefused {
		var ref protocol.Refused
		if err := ev.Decode(&ref); err != nil {
			return nil, h.s.failed(c, "decoding a refusal", err)
		}
		return nil, fmt.Errorf("%w: %s (%s)", a2a.ErrTaskNotCancelable, ref.Message, ref.Code)
	}
	ans, err := cl.WaitAsk(ctx, string(p.ID), h.s.cfg.Wait)
	if err != nil && !errors.Is(err, client.ErrNoAnswer) {
		return nil, h.s.failed(c, "reading the task", err)
	}
	return taskOf(string(p.ID), ans), nil
}

// OnResubscribeToTask follows a task: the task as it stands, then its
// artifact and final status once people answer.
func (h handler) OnResubscribeToTask(ctx context.Context, p *a2a.TaskIDParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if p == nil {
			yield(nil, fmt.Errorf("%w: params are missing: send {\"id\": \"<task id>\"}", a2a.ErrInvalidParams))
			return
		}
		c, cl, err := h.task(ctx, p.ID)
		if err != nil {
			yield(nil, err)
			return
		}
		ans, err := cl.WaitAsk(ctx, string(p.ID), time.Millisecond)
		if err != nil && !errors.Is(err, client.ErrNoAnswer) {
			yield(nil, h.s.failed(c, "reading the task", err))
			return
		}
		h.follow(ctx, c, cl, taskOf(string(p.ID), ans), yield)
	}
}

// follow yields t, then, as the ask moves on, a status update when
// people are asked, and the artifact and final status once it settles.
func (h handler) follow(ctx context.Context, c authority.Caller, cl *client.Client, t *a2a.Task, yield func(a2a.Event, error) bool) {
	if !yield(t, nil) || t.Status.State.Terminal() {
		return
	}
	state := t.Status.State
	for ctx.Err() == nil {
		ans, err := cl.WaitAsk(ctx, string(t.ID), streamWait)
		if ctx.Err() != nil {
			return
		}
		if err != nil && !errors.Is(err, client.ErrNoAnswer) {
			yield(nil, h.s.failed(c, "following the task", err))
			return
		}
		now := taskOf(string(t.ID), ans)
		if ans.Answered != nil {
			for _, a := range now.Artifacts {
				if !yield(&a2a.TaskArtifactUpdateEvent{TaskID: now.ID, ContextID: now.ContextID, Artifact: a, LastChunk: true}, nil) {
					return
				}
			}
			yield(&a2a.TaskStatusUpdateEvent{TaskID: now.ID, ContextID: now.ContextID, Status: now.Status, Final: true}, nil)
			return
		}
		if now.Status.State != state {
			state = now.Status.State
			if !yield(&a2a.TaskStatusUpdateEvent{TaskID: now.ID, ContextID: now.ContextID, Status: now.Status, Metadata: now.Metadata}, nil) {
				return
			}
		}
	}
}

// task finds a task the caller may read: one it may not is not found,
// as one that does not exist.
func (h handler) task(ctx context.Context, id a2a.TaskID) (authority.Caller, *client.Client, error) {
	c, err := callerOf(ctx)
	if err != nil {
		return c, nil, err
	}
	if err := protocol.CheckName("task id", string(id)); err != nil {
		return c, nil, fmt.Errorf("%w: %q is not a task id of this agent", a2a.ErrTaskNotFound, id)
	}
	cl, err := h.s.client(c, h.s.cfg.Wait)
	if err != nil {
		return c, nil, err
	}
	cp, err := cl.Checkpoint(ctx, protocol.AskFlow, string(id))
	if errors.Is(err, client.ErrNotFound) {
		return c, nil, fmt.Errorf("%w: no task %s", a2a.ErrTaskNotFound, id)
	}
	if err != nil {
		return c, nil, h.s.failed(c, "reading the task", err)
	}
	var ref *authority.Refusal
	if err := h.s.port.Authority().MayRead(c, authority.RunOf(cp)); errors.As(err, &ref) {
		return c, nil, fmt.Errorf("%w: no task %s", a2a.ErrTaskNotFound, id)
	}
	return c, cl, nil
}

// failed is the JSON-RPC error of a failure: a refusal says what to fix;
// anything else is logged, and the caller told to look there.
func (s *Server) failed(c authority.Caller, doing string, err error) error {
	var ref *client.RefusedError
	if errors.As(err, &ref) {
		return fmt.Errorf("%w: %s (%s)", a2a.ErrInvalidParams, ref.Refused.Message, ref.Refused.Code)
	}
	s.log.Error().Err(err).Str("caller", c.Name).Msg("a2a: " + doing)
	return fmt.Errorf("%w: %s failed; the server's log says why", a2a.ErrInternalError, doing)
}

// OnGetTaskPushConfig returns a push-notification configuration the
// caller set on a task: the one named, or its first.
func (h handler) OnGetTaskPushConfig(ctx context.Context, p *a2a.GetTaskPushConfigParams) (*a2a.TaskPushConfig, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: params are missing: send {\"id\": \"<task id>\"}", a2a.ErrInvalidParams)
	}
	c, _, err := h.task(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	list, err := h.s.pushesOf(ctx, c, p.TaskID)
	if err != nil {
		return nil, err
	}
	for _, tc := range list {
		if p.ConfigID == "" || tc.Config.ID == p.ConfigID {
			return tc, nil
		}
	}
	return nil, fmt.Errorf("%w: task %s has no push configuration %q of yours", a2a.ErrInvalidParams, p.TaskID, p.ConfigID)
}

// OnListTaskPushConfig lists the push-notification configurations the
// caller set on a task.
func (h handler) OnListTaskPushConfig(ctx context.Context, p *a2a.ListTaskPushConfigParams) ([]*a2a.TaskPushConfig, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: params are missing: send {\"id\": \"<task id>\"}", a2a.ErrInvalidParams)
	}
	c, _, err := h.task(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	return h.s.pushesOf(ctx, c, p.TaskID)
}

// OnSetTaskPushConfig keeps a push-notification configuration of a task
// the caller may read: once the task settles, Interlock POSTs it to the
// configuration's URL, through the outbound policy.
func (h handler) OnSetTaskPushConfig(ctx context.Context, p *a2a.TaskPushConfig) (*a2a.TaskPushConfig, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: params are missing: send {\"taskId\": \"<task id>\", \"pushNotificationConfig\": {\"url\": \"https://...\"}}", a2a.ErrInvalidParams)
	}
	c, _, err := h.task(ctx, p.TaskID)
	if err != nil {
		return nil, err
	}
	return h.s.setPush(ctx, c, p.TaskID, p.Config)
}

// OnDeleteTaskPushConfig deletes a push-notification configuration the
// caller set on a task.
func (h handler) OnDeleteTaskPushConfig(ctx context.Context, p *a2a.DeleteTaskPushConfigParams) error {
	if p == nil {
		return fmt.Errorf("%w: params are missing: send {\"id\": \"<task id>\", \"pushNotificationConfigId\": \"<id>\"}", a2a.ErrInvalidParams)
	}
	if _, err := h.OnGetTaskPushConfig(ctx, &a2a.GetTaskPushConfigParams{TaskID: p.TaskID, ConfigID: p.ConfigID}); err != nil || p.ConfigID == "" {
		if err == nil {
			err = fmt.Errorf("%w: name the configuration to delete (pushNotificationConfigId)", a2a.ErrInvalidParams)
		}
		return err
	}
	kv, err := h.s.bucket()
	if err != nil {
		return err
	}
	return kv.Delete(ctx, string(p.TaskID)+"."+p.ConfigID)
}

// OnGetExtendedAgentCard answers that the public card is the whole card.
func (handler) OnGetExtendedAgentCard(context.Context) (*a2a.AgentCard, error) {
	return nil, fmt.Errorf("%w: the public Agent Card (%s) is the whole card", a2a.ErrAuthenticatedExtendedCardNotConfigured, CardPath)
}
