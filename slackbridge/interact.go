package slackbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/slack-go/slack"

	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/protocol"
)

// interact answers Slack's interactivity requests: button clicks
// (block_actions) and modal submissions (view_submission). Each is
// verified with the signing secret first: a bad signature, or a timestamp
// more than 5 minutes off, is refused 401 and nothing else happens.
func (b *Bridge) interact(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST Slack's interactions here", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	sv, err := slack.NewSecretsVerifier(r.Header, b.cfg.SigningSecret)
	if err == nil {
		_, _ = sv.Write(body)
		err = sv.Ensure()
	}
	if err != nil {
		b.log.Warn().Err(err).Str("remote", r.RemoteAddr).Msg("slack bridge: interaction refused: not signed by Slack with this app's signing secret, or too old")
		http.Error(w, "the request is not signed by Slack, or its timestamp is more than 5 minutes off", http.StatusUnauthorized)
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil || form.Get("payload") == "" {
		http.Error(w, "expected a form with payload", http.StatusBadRequest)
		return
	}
	var cb slack.InteractionCallback
	if err := json.Unmarshal([]byte(form.Get("payload")), &cb); err != nil {
		http.Error(w, "payload is not an interaction", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), b.cfg.ResponseWait)
	defer cancel()
	switch cb.Type {
	case slack.InteractionTypeBlockActions:
		b.blockActions(ctx, cb)
		w.WriteHeader(http.StatusOK)
	case slack.InteractionTypeViewSubmission:
		resp := b.viewSubmission(ctx, cb)
		if resp == nil {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	default:
		w.WriteHeader(http.StatusOK)
	}
}

// user maps a Slack user to the approver they are.
func (b *Bridge) user(id string) (User, bool) {
	u, ok := b.cfg.Users[id]
	return u, ok
}

// blockActions handles a click on one of the bridge's buttons.
func (b *Bridge) blockActions(ctx context.Context, cb slack.InteractionCallback) {
	if len(cb.ActionCallback.BlockActions) == 0 {
		return
	}
	a := cb.ActionCallback.BlockActions[0]
	switch a.ActionID {
	case actionApprove, actionReject, actionEdit, actionAnswer, actionChoose:
	default:
		return
	}
	r, err := decodeRef(a.Value)
	if err != nil {
		b.log.Warn().Err(err).Str("action", a.ActionID).Msg("slack bridge: a click names no request")
		return
	}
	log := b.log.With().Str("flow", r.Flow).Str("run", r.Run).Str("request_id", r.RequestID).
		Str("slack_user", cb.User.ID).Str("action", a.ActionID).Logger()
	u, ok := b.user(cb.User.ID)
	if !ok {
		log.Info().Msg("slack bridge: click by a Slack user the configuration does not map; refused")
		b.ephemeral(ctx, cb, "You are not set up to answer Interlock's requests: ask an admin to add your Slack user id ("+cb.User.ID+") to the Slack bridge's users.")
		return
	}
	switch {
	case a.ActionID == actionReject && r.Why:
		// The approval takes a reason: ask for it.
		if !slices.Contains(u.Roles, r.Role) && r.Role != "" {
			b.ephemeral(ctx, cb, notRole(r.Role))
			return
		}
		if _, err := b.api.OpenViewContext(ctx, cb.TriggerID, rejectView(r)); err != nil {
			log.Warn().Err(err).Msg("slack bridge: opening a modal (views.open)")
		}
	case a.ActionID == actionApprove, a.ActionID == actionReject:
		decision := protocol.VerdictApprove
		if a.ActionID == actionReject {
			decision = protocol.VerdictReject
		}
		res := protocol.Resume{RequestID: r.RequestID, Decision: string(decision),
			IdempotencyKey: idempotencyKey(cb.User.ID, a.ActionTs, r.RequestID)}
		ev, err := b.resume(ctx, r, res, u)
		if msg := b.refusalText(r, ev, err); msg != "" {
			log.Info().Str("approver", u.Name).Msg("slack bridge: decision refused")
			b.ephemeral(ctx, cb, msg)
		}
	default:
		if protocol.RoleRestricted(r.Kind) && !slices.Contains(u.Roles, r.Role) {
			b.ephemeral(ctx, cb, notRole(r.Role))
			return
		}
		cp, err := b.port.Client("/slack").Checkpoint(ctx, r.Flow, r.Run)
		if err != nil {
			log.Warn().Err(err).Msg("slack bridge: reading the run for a modal")
			b.ephemeral(ctx, cb, "Interlock could not be reached; try again in a moment.")
			return
		}
		in := cp.Interrupt
		if cp.Status != "waiting" || in == nil || in.RequestID != r.RequestID {
			b.ephemeral(ctx, cb, "This request is no longer waiting: it was decided, answered, asked again or it expired.")
			return
		}
		var view slack.ModalViewRequest
		switch a.ActionID {
		case actionEdit:
			view = editView(r, in.Args)
		case actionAnswer:
			view = answerView(r, in.Questions)
		default:
			view = chooseView(r, in.Question, in.Options, in.Multiple)
		}
		if _, err := b.api.OpenViewContext(ctx, cb.TriggerID, view); err != nil {
			log.Warn().Err(err).Msg("slack bridge: opening a modal (views.open)")
		}
	}
}

// viewSubmission handles a modal's submission; a non-nil answer keeps the
// modal open with errors next to the fields.
func (b *Bridge) viewSubmission(ctx context.Context, cb slack.InteractionCallback) *slack.ViewSubmissionResponse {
	switch cb.View.CallbackID {
	case viewEdit, viewReject, viewAnswer, viewChoose:
	default:
		return nil
	}
	r, err := decodeRef(cb.View.PrivateMetadata)
	if err != nil {
		b.log.Warn().Err(err).Msg("slack bridge: a modal names no request")
		return nil
	}
	values := map[string]map[string]slack.BlockAction{}
	if cb.View.State != nil {
		values = cb.View.State.Values
	}
	field := blockArgs
	u, ok := b.user(cb.User.ID)
	res := protocol.Resume{RequestID: r.RequestID, IdempotencyKey: idempotencyKey(cb.User.ID, cb.View.ID+cb.View.Hash, r.RequestID)}
	switch cb.View.CallbackID {
	case viewEdit:
		var edits map[string]json.RawMessage
		text := values[blockArgs][inputElement].Value
		if err := json.Unmarshal([]byte(text), &edits); err != nil || edits == nil {
			return slack.NewErrorsViewSubmissionResponse(map[string]string{blockArgs: "Give a JSON object of the arguments, such as {\"amount\": 400}."})
		}
		res.Decision, res.Edits = string(protocol.VerdictEdit), edits
		res.Reason = strings.TrimSpace(values[blockReason][inputElement].Value)
	case viewReject:
		field = blockReason
		res.Decision = string(protocol.VerdictReject)
		res.Reason = strings.TrimSpace(values[blockReason][inputElement].Value)
		if res.Reason == "" {
			return slack.NewErrorsViewSubmissionResponse(map[string]string{blockReason: "Say why you reject it: this approval takes a reason."})
		}
	case viewAnswer:
		// Each answer is read by the one rule of typed text, by its
		// question's type.
		types := map[string]string{}
		if cp, err := b.port.Client("/slack").Checkpoint(ctx, r.Flow, r.Run); err == nil && cp.Interrupt != nil {
			for _, q := range cp.Interrupt.Questions {
				types[q.Field] = q.Type
			}
		}
		res.Answers = map[string]json.RawMessage{}
		errs := map[string]string{}
		for block, v := range values {
			f, isQ := strings.CutPrefix(block, questionPfx)
			val := strings.TrimSpace(v[inputElement].Value)
			if !isQ || val == "" {
				continue
			}
			field = block
			raw, err := protocol.Value(val, types[f])
			if err != nil {
				errs[block] = "The answer " + err.Error() + "."
				continue
			}
			res.Answers[f] = raw
		}
		if len(errs) > 0 {
			return slack.NewErrorsViewSubmissionResponse(errs)
		}
	case viewChoose:
		field = blockChoice
		a := values[blockChoice][inputElement]
		if a.SelectedOption.Value != "" {
			res.Selected = append(res.Selected, a.SelectedOption.Value)
		}
		for _, o := range a.SelectedOptions {
			res.Selected = append(res.Selected, o.Value)
		}
	}
	if !ok {
		return slack.NewErrorsViewSubmissionResponse(map[string]string{field: "You are not set up to answer Interlock's requests: ask an admin to add your Slack user id (" + cb.User.ID + ")."})
	}
	ev, err := b.resume(ctx, r, res, u)
	if msg := b.refusalText(r, ev, err); msg != "" {
		return slack.NewErrorsViewSubmissionResponse(map[string]string{field: truncate(msg, 1900)})
	}
	return nil
}

// resume sends a decision or an answer vouched for the mapped user: the
// engine checks the role, applies it, refuses it, and audits either way.
func (b *Bridge) resume(ctx context.Context, r ref, res protocol.Resume, u User) (client.Event, error) {
	c := b.port.Client("/slack/" + url.PathEscape(u.Name)).As(u.Name).WithWait(b.cfg.ResponseWait)
	return b.port.ResumeAs(ctx, c, r.Flow, r.Run, res, u.Name, u.Roles)
}

// refusalText is what to tell the person when their resume did not apply,
// or "" when it did (or is queued: the message is updated when it
// applies).
func (b *Bridge) refusalText(r ref, ev client.Event, err error) string {
	var refused *client.RefusedError
	switch {
	case errors.Is(err, client.ErrNoAnswer), errors.Is(err, context.DeadlineExceeded):
		return ""
	case errors.As(err, &refused):
		return refusedText(r, refused.Refused)
	case err != nil:
		b.log.Warn().Err(err).Str("flow", r.Flow).Str("run", r.Run).Msg("slack bridge: sending a resume")
		return "Interlock could not be reached; try again in a moment."
	case ev.Kind == protocol.EventRefused:
		var ref protocol.Refused
		if ev.Decode(&ref) != nil {
			return "Interlock refused this."
		}
		return refusedText(r, ref)
	}
	return ""
}

func refusedText(r ref, ref protocol.Refused) string {
	switch ref.Code {
	case protocol.CodeForbidden:
		return notRole(r.Role)
	case protocol.CodeTokenMismatch, protocol.CodeNotWaiting, protocol.CodeExpired, protocol.CodeUnknownRun:
		return "This request is no longer waiting: " + ref.Message
	}
	return ref.Message
}

func notRole(role string) string {
	article := "a"
	if role != "" && strings.ContainsRune("aeiou", rune(role[0])) {
		article = "an"
	}
	return fmt.Sprintf("You are not %s %s: only someone holding the %s role may decide this approval.", article, role, role)
}

// idempotencyKey makes a click or a submission Slack delivers twice count
// once.
func idempotencyKey(user, at, requestID string) string {
	return truncate("slack-"+user+"-"+at+"-"+requestID, 200)
}

// ephemeral tells the person who clicked, and only them.
func (b *Bridge) ephemeral(ctx context.Context, cb slack.InteractionCallback, text string) {
	channel := cb.Channel.ID
	if channel == "" {
		channel = cb.Container.ChannelID
	}
	opts := []slack.MsgOption{slack.MsgOptionText(text, false)}
	if cb.Container.ThreadTs != "" {
		opts = append(opts, slack.MsgOptionTS(cb.Container.ThreadTs))
	}
	// Its own deadline: the interaction's may be spent waiting on the engine.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), applyTimeout)
	defer cancel()
	if _, err := b.api.PostEphemeralContext(ctx, channel, cb.User.ID, opts...); err != nil {
		b.log.Warn().Err(err).Str("slack_user", cb.User.ID).Msg("slack bridge: telling a user (chat.postEphemeral)")
	}
}
