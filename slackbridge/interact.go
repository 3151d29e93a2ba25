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
	"unicode"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/client"
	"github.com/interlockhq/interlock/people"
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

// user maps a Slack user to the approver they are: the person of the
// directory whose Slack id it is, else the user of Config.Users.
func (b *Bridge) user(id string) (User, bool) {
	if p, ok := b.directory().BySlack(id); ok {
		return User{Name: p.Name, Roles: p.Roles}, true
	}
	u, ok := b.cfg.Users[id]
	return u, ok
}

// directory is the directory of people in force, or nil.
func (b *Bridge) directory() *people.Directory {
	if b.cfg.People == nil {
		return nil
	}
	return b.cfg.People()
}

// channel is the channel of role's approvals: the role's Slack channel in
// the directory, else Config.Channels', else "".
func (b *Bridge) channel(role string) string {
	if role == "" {
		return ""
	}
	if r, _ := b.directory().Role(role); r.Slack != "" {
		return r.Slack
	}
	return b.cfg.Channels[role]
}

// blockActions handles a click on one of the bridge's buttons.
func (b *Bridge) blockActions(ctx context.Context, cb slack.InteractionCallback) {
	if len(cb.ActionCallback.BlockActions) == 0 {
		return
	}
	a := cb.ActionCallback.BlockActions[0]
	switch a.ActionID {
	case actionApprove, actionReject, actionEdit, actionAnswer, actionChoose, actionRespond, actionClaim, actionRelease, actionDelegate:
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
	case a.ActionID == actionClaim, a.ActionID == actionRelease:
		op := protocol.AssignClaim
		if a.ActionID == actionRelease {
			op = protocol.AssignRelease
		}
		ev, err := b.client(u).Assign(ctx, r.Flow, r.Run, protocol.Assign{RequestID: r.RequestID, Op: op})
		if _, msg := b.refusal(r, ev, err); msg != "" {
			log.Info().Str("approver", u.Name).Msg("slack bridge: " + op + " refused")
			b.ephemeral(ctx, cb, msg)
		}
	case a.ActionID == actionApprove, a.ActionID == actionReject && !r.Why:
		decision := protocol.VerdictApprove
		if a.ActionID == actionReject {
			decision = protocol.VerdictReject
		}
		res := protocol.Resume{RequestID: r.RequestID, Decision: string(decision),
			IdempotencyKey: idempotencyKey(cb.User.ID, a.ActionTs, r.RequestID)}
		ev, err := b.resume(ctx, r, res, u)
		if _, msg := b.refusal(r, ev, err); msg != "" {
			log.Info().Str("approver", u.Name).Msg("slack bridge: decision refused")
			b.ephemeral(ctx, cb, msg)
		}
	default:
		// A modal: opened only on the pending request, for someone who
		// may answer it (the engine decides again on submission).
		cp, err := b.port.Client("/slack").Checkpoint(ctx, r.Flow, r.Run)
		if err != nil {
			log.Warn().Err(err).Msg("slack bridge: reading the run for a modal")
			b.ephemeral(ctx, cb, "Interlock could not be reached; try again in a moment.")
			return
		}
		in := cp.Interrupt
		if cp.Status != protocol.StatusWaiting || in == nil || in.RequestID != r.RequestID {
			b.ephemeral(ctx, cb, "This request is no longer waiting: it was decided, answered, asked again or it expired.")
			return
		}
		// Asked of the authority as what the modal is for: a delegation
		// is an assign, an edit a vote where votes are counted.
		run := b.port.Authority()
		switch a.ActionID {
		case actionDelegate:
			err = run.MayAssign(b.caller(u), authority.Delegate, authority.RunOf(cp))
		case actionEdit:
			err = run.MayDecide(b.caller(u), authority.RunOf(cp), protocol.VerdictEdit)
		case actionReject:
			err = run.MayDecide(b.caller(u), authority.RunOf(cp), protocol.VerdictReject)
		case actionRespond:
			err = run.MayDecide(b.caller(u), authority.RunOf(cp), protocol.VerdictRespond)
		default:
			err = run.MayDecide(b.caller(u), authority.RunOf(cp), "")
		}
		var ref *authority.Refusal
		if errors.As(err, &ref) {
			b.ephemeral(ctx, cb, ref.Tell())
			return
		}
		var view slack.ModalViewRequest
		switch a.ActionID {
		case actionReject:
			view = rejectView(r)
		case actionEdit:
			view = editView(r, in.Args, in.ArgsSchema)
		case actionRespond:
			view = respondView(r)
		case actionDelegate:
			if !protocol.RoleRestricted(in.Kind) {
				return
			}
			view = delegateView(r, b.roles())
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
	case viewEdit, viewReject, viewAnswer, viewChoose, viewRespond, viewDelegate:
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
	if cb.View.CallbackID == viewDelegate {
		return b.delegate(ctx, cb, r, values)
	}
	field := blockReason
	// fieldOf is the block an engine's invalid_answer goes to.
	fieldOf := func(string) string { return field }
	u, ok := b.user(cb.User.ID)
	res := protocol.Resume{RequestID: r.RequestID, IdempotencyKey: idempotencyKey(cb.User.ID, cb.View.ID+cb.View.Hash, r.RequestID)}
	switch cb.View.CallbackID {
	case viewEdit:
		cp, err := b.port.Client("/slack").Checkpoint(ctx, r.Flow, r.Run)
		if err != nil || cp.Interrupt == nil || cp.Interrupt.RequestID != r.RequestID {
			return slack.NewErrorsViewSubmissionResponse(map[string]string{blockReason: "This request is no longer waiting: it was decided, answered, asked again or it expired."})
		}
		args := protocol.Args(cp.Interrupt.Args, cp.Interrupt.ArgsSchema)
		edits, errs := readEdits(args, values)
		if len(errs) > 0 {
			return slack.NewErrorsViewSubmissionResponse(errs)
		}
		res.Decision, res.Edits = string(protocol.VerdictEdit), edits
		if len(edits) == 0 {
			// Nothing changed: an approval as proposed.
			res.Decision = string(protocol.VerdictApprove)
		}
		res.Reason = strings.TrimSpace(values[blockReason][inputElement].Value)
		if len(args) > 0 {
			field = argPfx + args[0].Name
		}
		fieldOf = func(msg string) string { return argBlockOf(msg, args, field) }
	case viewReject:
		res.Decision = string(protocol.VerdictReject)
		res.Reason = strings.TrimSpace(values[blockReason][inputElement].Value)
		if res.Reason == "" {
			return slack.NewErrorsViewSubmissionResponse(map[string]string{blockReason: "Say why you reject it: this approval takes a reason."})
		}
	case viewRespond:
		field = blockMessage
		res.Decision = string(protocol.VerdictRespond)
		res.Message = strings.TrimSpace(values[blockMessage][inputElement].Value)
		if res.Message == "" {
			return slack.NewErrorsViewSubmissionResponse(map[string]string{blockMessage: "Write the message the agent gets instead of a decision."})
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
	if refused, msg := b.refusal(r, ev, err); msg != "" {
		block := field
		if refused != nil && refused.Code == protocol.CodeInvalidAnswer {
			block = fieldOf(refused.Message)
		}
		return slack.NewErrorsViewSubmissionResponse(map[string]string{block: truncate(msg, 1900)})
	}
	return nil
}

// delegate sends the delegation of the Delegate modal: to the person the
// chosen Slack user is, or to the chosen role; errors keep the modal
// open, next to the field they are about.
func (b *Bridge) delegate(ctx context.Context, cb slack.InteractionCallback, r ref, values map[string]map[string]slack.BlockAction) *slack.ViewSubmissionResponse {
	person := values[blockPerson][inputElement].SelectedUser
	role := values[blockRole][inputElement].SelectedOption.Value
	field, to := blockPerson, ""
	switch {
	case person != "" && role != "":
		return slack.NewErrorsViewSubmissionResponse(map[string]string{blockPerson: "Pick a person or a role, not both."})
	case person != "":
		d, ok := b.user(person)
		if !ok {
			return slack.NewErrorsViewSubmissionResponse(map[string]string{blockPerson: "This Slack user (" + truncate(person, 64) +
				") is not configured in the Slack bridge's users, so Interlock does not know who they are: ask an admin to add them, or pick another person or a role."})
		}
		to = d.Name
	case role != "":
		field = blockRole
		if !slices.Contains(b.roles(), role) {
			return slack.NewErrorsViewSubmissionResponse(map[string]string{blockRole: "Pick one of the listed roles."})
		}
		to = protocol.RolePrefix + role
	default:
		return slack.NewErrorsViewSubmissionResponse(map[string]string{blockPerson: "Pick the person or the role to delegate this approval to."})
	}
	u, ok := b.user(cb.User.ID)
	if !ok {
		return slack.NewErrorsViewSubmissionResponse(map[string]string{field: "You are not set up to answer Interlock's requests: ask an admin to add your Slack user id (" + cb.User.ID + ")."})
	}
	a := protocol.Assign{RequestID: r.RequestID, Op: protocol.AssignDelegate, To: to,
		Reason: strings.TrimSpace(values[blockReason][inputElement].Value)}
	ev, err := b.client(u).Assign(ctx, r.Flow, r.Run, a)
	if _, msg := b.refusal(r, ev, err); msg != "" {
		b.log.Info().Str("flow", r.Flow).Str("run", r.Run).Str("request_id", r.RequestID).Str("approver", u.Name).
			Msg("slack bridge: delegate refused")
		return slack.NewErrorsViewSubmissionResponse(map[string]string{field: truncate(msg, 1900)})
	}
	return nil
}

// roles are the approver roles the configuration knows, sorted: those
// with a channel and those its users hold.
func (b *Bridge) roles() []string {
	var out []string
	for role := range b.cfg.Channels {
		out = append(out, role)
	}
	for _, u := range b.cfg.Users {
		out = append(out, u.Roles...)
	}
	d := b.directory()
	for _, r := range d.Roles() {
		out = append(out, r.Name)
	}
	for _, p := range d.People() {
		out = append(out, p.Roles...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// readEdits reads the edit modal's inputs, each by its argument's type,
// into the edits of the arguments changed; errs are by block.
func readEdits(args []protocol.Arg, values map[string]map[string]slack.BlockAction) (map[string]json.RawMessage, map[string]string) {
	edits := map[string]json.RawMessage{}
	errs := map[string]string{}
	for _, a := range args {
		block := argPfx + a.Name
		v, given := values[block][inputElement]
		if !given {
			continue
		}
		raw, present, err := readArg(a, v)
		switch {
		case err != nil:
			errs[block] = truncate(err.Error(), 1900)
		case present && !protocol.SameJSON(raw, a.Value):
			edits[a.Name] = raw
		}
	}
	return edits, errs
}

// readArg reads one argument's input as argInput wrote it; present is
// false for an input left empty, which leaves the argument as it is.
func readArg(a protocol.Arg, v slack.BlockAction) (raw json.RawMessage, present bool, err error) {
	switch {
	case len(a.Enum) > 0:
		if v.SelectedOption.Value == "" {
			return nil, false, nil
		}
		if !json.Valid([]byte(v.SelectedOption.Value)) {
			return nil, false, fmt.Errorf("pick one of the listed values")
		}
		return json.RawMessage(v.SelectedOption.Value), true, nil
	case a.Type == protocol.JSONBoolean:
		for _, o := range v.SelectedOptions {
			if o.Value == "true" {
				return json.RawMessage("true"), true, nil
			}
		}
		return json.RawMessage("false"), true, nil
	case a.Type == protocol.JSONString:
		if v.Value == "" && protocol.JSONTypeOf(a.Value) != protocol.JSONString {
			return nil, false, nil
		}
		raw, err := protocol.Value(v.Value, protocol.JSONString)
		return raw, err == nil, err
	}
	t := strings.TrimSpace(v.Value)
	if t == "" {
		return nil, false, nil
	}
	if a.Type == "" || !a.Scalar() {
		if !json.Valid([]byte(t)) {
			return nil, false, fmt.Errorf("this is not JSON: write it as JSON, such as %s", truncate(a.Input(), 80))
		}
		return json.RawMessage(t), true, nil
	}
	raw, err = protocol.Value(t, a.Type)
	if err != nil {
		return nil, false, fmt.Errorf("%s", capitalise(err.Error()))
	}
	return raw, true, nil
}

// argBlockOf is the block of the argument an engine's invalid_answer
// names by its JSON path ("/amount: must be <= 4800"), else fallback.
func argBlockOf(msg string, args []protocol.Arg, fallback string) string {
	p, ok := strings.CutPrefix(msg, "/")
	if !ok {
		return fallback
	}
	name, _, _ := strings.Cut(p, ":")
	name, _, _ = strings.Cut(name, "/")
	name = strings.NewReplacer("~1", "/", "~0", "~").Replace(name)
	for _, a := range args {
		if a.Name == name {
			return argPfx + name
		}
	}
	return fallback
}

// caller is the Slack user mapped to u, as the authority knows them.
func (b *Bridge) caller(u User) authority.Caller {
	return authority.Caller{Name: u.Name, Method: protocol.AuthSlack, Roles: u.Roles}
}

// client is the wire client of the Slack user mapped to u: every command
// it sends is vouched for them.
func (b *Bridge) client(u User) *client.Client {
	source := "/slack/" + url.PathEscape(u.Name)
	c, err := b.port.ClientAs(source, b.caller(u).Protocol())
	if err != nil {
		b.log.Error().Err(err).Msg("slack bridge: vouching for a Slack user")
		return b.port.Client(source).As(u.Name).WithWait(b.cfg.ResponseWait)
	}
	return c.WithWait(b.cfg.ResponseWait)
}

// resume sends a decision or an answer vouched for the mapped user: the
// engine checks the role, applies it, refuses it, and audits either way.
func (b *Bridge) resume(ctx context.Context, r ref, res protocol.Resume, u User) (client.Event, error) {
	return b.client(u).Resume(ctx, r.Flow, r.Run, res)
}

// refusal is what to tell the person when their command did not apply,
// with the engine's refusal when it refused; "" when it applied (or is
// queued: the message is updated when it applies).
func (b *Bridge) refusal(r ref, ev client.Event, err error) (*protocol.Refused, string) {
	var refused *client.RefusedError
	switch {
	case errors.Is(err, client.ErrNoAnswer), errors.Is(err, context.DeadlineExceeded):
		return nil, ""
	case errors.As(err, &refused):
		return &refused.Refused, authority.Tell(refused.Refused)
	case err != nil:
		b.log.Warn().Err(err).Str("flow", r.Flow).Str("run", r.Run).Msg("slack bridge: sending a command")
		return nil, "Interlock could not be reached; try again in a moment."
	case ev.Kind == protocol.EventRefused:
		var ref protocol.Refused
		if ev.Decode(&ref) != nil {
			return nil, "Interlock refused this."
		}
		return &ref, authority.Tell(ref)
	}
	return nil, ""
}

// capitalise starts s with a capital letter.
func capitalise(s string) string {
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
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
