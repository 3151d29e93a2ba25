package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/engine/enginetest"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/protocol"
)

func TestBookingWalkThroughEveryQuestionBehaviour(t *testing.T) {
	h := enginetest.New(t, booking.Flow())
	run := h.Start(nil)

	in := h.Interrupt(run)
	if in.Node != "ask_email" || in.Kind != protocol.KindQuestion || len(in.Questions) != 1 {
		t.Fatalf("first interrupt = %+v", in)
	}
	if got := in.Questions[0].Context; got != "Politely reject generic domains like gmail.com." {
		t.Fatalf("hidden context = %q", got)
	}

	h.Answer(run, map[string]any{"email": "not-an-email"})
	in2 := h.Interrupt(run)
	if in2.ResumeToken == in.ResumeToken || in2.RequestID == in.RequestID {
		t.Fatal("re-ask reused the token or request id")
	}
	if in2.Checkpoint <= in.Checkpoint {
		t.Fatalf("checkpoint did not move: %d then %d", in.Checkpoint, in2.Checkpoint)
	}
	want := "ERROR: That doesn't look like an email. Politely reject generic domains like gmail.com."
	if got := in2.Questions[0].Context; got != want {
		t.Fatalf("re-ask context = %q, want %q", got, want)
	}

	h.Answer(run, map[string]any{"email": "  Ann@Example.COM "})
	if got := h.State(run)["email"]; got != "ann@example.com" {
		t.Fatalf("email stored as %q, want trimmed and lower-cased", got)
	}

	in = h.Interrupt(run)
	if in.Node != "ask_contact" || in.Context != "Ask both in one natural message." || len(in.Questions) != 2 {
		t.Fatalf("contact interrupt = %+v", in)
	}
	h.Answer(run, map[string]any{"name": "Ann"})
	in = h.Interrupt(run)
	if got := in.Fields(); len(got) != 1 || got[0] != "phone" {
		t.Fatalf("partial answer re-asked %v, want only phone", got)
	}
	h.Answer(run, map[string]any{"phone": "+44 20 7946 0000"})

	in = h.Interrupt(run)
	if in.Node != "ask_level" || strings.Join(in.Questions[0].Suggestions, ",") != "beginner,intermediate,advanced" {
		t.Fatalf("level interrupt = %+v", in)
	}
	h.Answer(run, map[string]any{"level": "expert"})
	in = h.Interrupt(run)
	if in.Node != "ask_level" || !strings.HasPrefix(in.Questions[0].Context, "ERROR: ") {
		t.Fatalf("level not re-asked with an error: %+v", in)
	}
	h.Answer(run, map[string]any{"level": "Advanced"})

	in = h.Interrupt(run)
	if got := strings.Join(in.Fields(), ","); got != "driver.name,driver.license" {
		t.Fatalf("driver fields = %s", got)
	}
	h.Answer(run, map[string]any{"driver.name": "Bob", "driver.license": "D123"})

	in = h.Interrupt(run)
	if in.Kind != protocol.KindChoice || !in.IsMultiple() || len(in.Options) != 3 {
		t.Fatalf("topics interrupt = %+v", in)
	}
	out := h.Resume(run, engine.Resume{Selected: []string{"product", "cooking"}})
	if out.Refused == nil || out.Refused.Code != protocol.CodeInvalidAnswer {
		t.Fatalf("unknown option id: outcome %+v, want invalid_answer", out)
	}
	h.Choose(run, "product", "design")
	h.WantStatus(run, engine.Completed)

	st := h.State(run)
	if st["name"] != "Ann" || st["level"] != "advanced" {
		t.Fatalf("final state = %v", st)
	}
	if d := st["driver"].(map[string]any); d["name"] != "Bob" || d["license"] != "D123" {
		t.Fatalf("driver = %v", d)
	}
	if topics := st["topics"].([]any); len(topics) != 2 || topics[0] != "product" {
		t.Fatalf("topics = %v", topics)
	}
	evs := h.Events(run)
	last := evs[len(evs)-1]
	if last.Kind != "completed" || last.Data["state"].(map[string]any)["email"] != "ann@example.com" {
		t.Fatalf("last event = %s %v", last.Kind, last.Data)
	}
	if len(h.Store.Pending()) != 0 {
		t.Fatalf("pending index still holds %v", h.Store.Pending())
	}
}

func TestAutoSkipFilledFieldsAndEmptyValuesDoNotCount(t *testing.T) {
	h := enginetest.New(t, booking.Flow())
	run := h.Start(map[string]any{
		"email":  "ann@example.com",
		"name":   "Ann",
		"phone":  "", // empty does not count
		"level":  nil,
		"driver": map[string]any{"name": "Bob"},
	})
	in := h.Interrupt(run)
	if in.Node != "ask_contact" || strings.Join(in.Fields(), ",") != "phone" {
		t.Fatalf("want only phone asked at ask_contact, got %s %v", in.Node, in.Fields())
	}
	h.Answer(run, map[string]any{"phone": "1"})
	if in := h.Interrupt(run); in.Node != "ask_level" {
		t.Fatalf("null level was not asked: %s", in.Node)
	}
	h.Answer(run, map[string]any{"level": "beginner"})
	if in := h.Interrupt(run); strings.Join(in.Fields(), ",") != "driver.license" {
		t.Fatalf("nested partial: asked %v", in.Fields())
	}
}

func TestAutoSkippedValuesStillGoThroughValidators(t *testing.T) {
	h := enginetest.New(t, booking.Flow())
	run := h.Start(map[string]any{"email": "nope"})
	in := h.Interrupt(run)
	if in.Node != "ask_email" || !strings.HasPrefix(in.Questions[0].Context, "ERROR: ") {
		t.Fatalf("invalid start value was not re-asked with an error: %+v", in)
	}
	if _, ok := h.State(run)["email"]; ok {
		t.Fatal("rejected start value still in state")
	}
}

func TestValidatorsRunOnlyWhenEveryFieldIsFilled(t *testing.T) {
	calls := 0
	f := engine.NewFlow[map[string]any]("two").
		Node("ask", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			check := func(_ context.Context, v any) (engine.Update, error) {
				calls++
				if v == "bad" {
					return nil, engine.Reject("no")
				}
				return nil, nil
			}
			_, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{
				{Field: "a", Question: "A?", Validate: check},
				{Field: "b", Question: "B?", Validate: check},
			}})
			return err
		}).Start("ask").MustBuild()
	h := enginetest.New(t, f)
	run := h.Start(nil)
	h.Answer(run, map[string]any{"a": "bad"})
	if calls != 0 {
		t.Fatalf("validators ran %d times before every field was filled", calls)
	}
	h.Answer(run, map[string]any{"b": "fine"})
	in := h.Interrupt(run)
	if strings.Join(in.Fields(), ",") != "a" || in.Questions[0].Context != "ERROR: no" {
		t.Fatalf("want a re-asked with ERROR: no, got %+v", in.Questions)
	}
	if got := h.Checkpoint(run).Interrupt.Answers; string(got["b"]) != `"fine"` {
		t.Fatalf("other answer not kept: %v", got)
	}
	h.Answer(run, map[string]any{"a": "good"})
	h.WantStatus(run, engine.Completed)
}

func TestNodeInterruptsTwiceAnswersMatchedInOrderAndStepsRunOnce(t *testing.T) {
	charges := 0
	f := engine.NewFlow[map[string]any]("pay").
		Node("pay", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			receipt, err := engine.Step(ctx, n, "charge", func(context.Context) (string, error) {
				charges++
				return "rc-1", nil
			})
			if err != nil {
				return err
			}
			first, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{{Field: "first", Question: "1?"}}})
			if err != nil {
				return err
			}
			pick, err := n.Choose(ctx, engine.Choice{Question: "2?", Options: []engine.Option{{ID: "x"}, {ID: "y"}}})
			if err != nil {
				return err
			}
			return n.Update(engine.Update{"summary": first.String("first") + "/" + pick[0] + "/" + receipt})
		}).Start("pay").MustBuild()
	h := enginetest.New(t, f)
	run := h.Start(nil)
	h.Answer(run, map[string]any{"first": "one"})
	if in := h.Interrupt(run); in.Kind != protocol.KindChoice {
		t.Fatalf("second interrupt kind = %s", in.Kind)
	}
	h.Choose(run, "y")
	h.WantStatus(run, engine.Completed)
	if got := h.State(run)["summary"]; got != "one/y/rc-1" {
		t.Fatalf("summary = %v", got)
	}
	if charges != 1 {
		t.Fatalf("step ran %d times, want 1", charges)
	}
}

func TestChoiceRefusesBadSelections(t *testing.T) {
	f := engine.NewFlow[map[string]any]("pick").
		Node("pick", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			ids, err := n.Choose(ctx, engine.Choice{Question: "?", Options: []engine.Option{{ID: "a"}, {ID: "b"}}})
			if err != nil {
				return err
			}
			return n.Set("picked", ids[0])
		}).Start("pick").MustBuild()
	h := enginetest.New(t, f)
	run := h.Start(nil)
	for name, sel := range map[string][]string{"unknown": {"zzz"}, "two for single": {"a", "b"}, "none": nil} {
		out := h.Resume(run, engine.Resume{Selected: sel})
		if out.Refused == nil || out.Refused.Code != protocol.CodeInvalidAnswer {
			t.Errorf("%s: outcome %+v, want invalid_answer", name, out)
		}
	}
	h.Choose(run, "b")
	if h.State(run)["picked"] != "b" {
		t.Fatal("choice not applied")
	}
}

func TestResumeTokenIsSingleUseAndChecked(t *testing.T) {
	h := enginetest.New(t, booking.Flow())
	run := h.Start(nil)
	in := h.Interrupt(run)

	out := h.Resume(run, engine.Resume{Token: "forged", Answers: raw(t, map[string]any{"email": "a@b.c"})})
	if out.Refused == nil || out.Refused.Code != protocol.CodeTokenMismatch {
		t.Fatalf("forged token: %+v", out)
	}
	h.Answer(run, map[string]any{"email": "a@b.c"})
	out = h.Resume(run, engine.Resume{Token: in.ResumeToken, Answers: raw(t, map[string]any{"name": "x"})})
	if out.Refused == nil || out.Refused.Code != protocol.CodeTokenMismatch {
		t.Fatalf("used token: %+v", out)
	}
	stale := in.Checkpoint
	out = h.Resume(run, engine.Resume{ExpectedCheckpoint: &stale, Answers: raw(t, map[string]any{"name": "x"})})
	if out.Refused == nil || out.Refused.Code != protocol.CodeStaleCheckpoint {
		t.Fatalf("stale checkpoint: %+v", out)
	}
}

func TestRepeatedResumeWithSameIdempotencyKeyHasEffectOnce(t *testing.T) {
	h := enginetest.New(t, booking.Flow())
	run := h.Start(nil)
	in := h.Interrupt(run)
	r := engine.Resume{Flow: booking.Name, Run: run, Token: in.ResumeToken,
		Answers: raw(t, map[string]any{"email": "a@b.c"}), IdempotencyKey: "k1",
		Update: raw(t, map[string]any{"notes": "hello"})}
	r.EventID = "e1"
	first, err := h.Runner.Resume(t.Context(), r)
	if err != nil || first.Refused != nil {
		t.Fatalf("first: %+v %v", first, err)
	}
	r.EventID = "e2"
	again, err := h.Runner.Resume(t.Context(), r)
	if err != nil || again.Refused != nil || !again.Duplicate {
		t.Fatalf("repeat: %+v %v, want acknowledged duplicate", again, err)
	}
	if notes := h.State(run)["notes"].([]any); len(notes) != 1 {
		t.Fatalf("notes = %v, want one", notes)
	}
}

func TestUpdateGoesThroughReducers(t *testing.T) {
	h := enginetest.New(t, booking.Flow())
	run := h.Start(map[string]any{"notes": []string{"from start"}})
	h.Resume(run, engine.Resume{Answers: raw(t, map[string]any{"email": "a@b.c"}), Update: raw(t, map[string]any{"notes": []string{"checked with finance"}})})
	notes := h.State(run)["notes"].([]any)
	if len(notes) != 2 || notes[1] != "checked with finance" {
		t.Fatalf("notes = %v, want appended", notes)
	}
}

func TestStateMustSurviveJSON(t *testing.T) {
	type draft struct {
		Body       string
		receivedAt time.Time
	}
	cases := []struct {
		name    string
		value   any
		wantErr string
	}{
		{"NaN", math.NaN(), "state.draft: NaN"},
		{"func", func() {}, "state.draft: a func()"},
		{"channel", make(chan int), "state.draft: a chan int"},
		{"int keys", map[int]string{1: "a"}, "state.draft: a map with int keys"},
		{"unexported", draft{Body: "x"}, "state.draft.receivedAt: unexported field"},
		{"nested inf", map[string]any{"x": []any{math.Inf(1)}}, "state.draft.x[0]: +Inf"},
		{"fine", map[string]any{"at": time.Unix(0, 0).UTC()}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := engine.NewFlow[map[string]any]("j").
				Node("put", func(ctx context.Context, n *engine.Node[map[string]any]) error {
					return n.Set("draft", tc.value)
				}).Start("put").MustBuild()
			h := enginetest.New(t, f)
			run := h.Start(nil)
			cp := h.Checkpoint(run)
			if tc.wantErr == "" {
				h.WantStatus(run, engine.Completed)
				return
			}
			if cp.Status != engine.Failed || !strings.Contains(cp.Error, tc.wantErr) {
				t.Fatalf("status %s error %q, want failed with %q", cp.Status, cp.Error, tc.wantErr)
			}
			evs := h.Events(run)
			if last := evs[len(evs)-1]; last.Kind != "failed" || last.Data["node"] != "put" {
				t.Fatalf("last event %s %v", last.Kind, last.Data)
			}
		})
	}
}

func TestTypedStateRejectsValuesThatDoNotFit(t *testing.T) {
	type S struct {
		Count int `json:"count"`
	}
	f := engine.NewFlow[S]("typed").
		Node("n", func(ctx context.Context, n *engine.Node[S]) error {
			return n.Set("count", "many")
		}).Start("n").MustBuild()
	h := enginetest.New(t, f)
	run := h.Start(nil)
	cp := h.Checkpoint(run)
	if cp.Status != engine.Failed || !strings.Contains(cp.Error, "state.count") {
		t.Fatalf("status %s error %q", cp.Status, cp.Error)
	}
}

func TestBuildNamesWhatIsWrong(t *testing.T) {
	noop := func(context.Context, *engine.Node[map[string]any]) error { return nil }
	cases := []struct {
		name  string
		build func() error
		want  string
	}{
		{"unknown node", func() error {
			_, err := engine.NewFlow[map[string]any]("f").Node("a", noop).Start("a").Edge("a", "b").Build()
			return err
		}, `"b" is not a node`},
		{"missing start", func() error {
			_, err := engine.NewFlow[map[string]any]("f").Node("a", noop).Build()
			return err
		}, "no start node"},
		{"unreachable", func() error {
			_, err := engine.NewFlow[map[string]any]("f").Node("a", noop).Node("lonely", noop).Start("a").Build()
			return err
		}, `node "lonely" is unreachable`},
		{"bad flow name", func() error {
			_, err := engine.NewFlow[map[string]any]("my flow").Node("a", noop).Start("a").Build()
			return err
		}, `flow name "my flow"`},
		{"branch target", func() error {
			_, err := engine.NewFlow[map[string]any]("f").Node("a", noop).Start("a").
				Branch("a", func(map[string]any) string { return engine.End }, "nowhere").Build()
			return err
		}, `"nowhere" is not a node`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.build()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %s", err, tc.want)
			}
		})
	}
}

func TestBranchRoutesOnState(t *testing.T) {
	type S struct {
		Amount int    `json:"amount"`
		Path   string `json:"path,omitempty"`
	}
	set := func(p string) engine.NodeFunc[S] {
		return func(ctx context.Context, n *engine.Node[S]) error { return n.Set("path", p) }
	}
	f := engine.NewFlow[S]("route").
		Node("check", func(context.Context, *engine.Node[S]) error { return nil }).
		Node("big", set("big")).Node("small", set("small")).
		Start("check").
		Branch("check", func(s S) string {
			if s.Amount > 500 {
				return "big"
			}
			return "small"
		}, "big", "small").
		MustBuild()
	h := enginetest.New(t, f)
	if got := h.State(h.Start(map[string]any{"amount": 4800}))["path"]; got != "big" {
		t.Fatalf("path = %v", got)
	}
	if got := h.State(h.Start(map[string]any{"amount": 5}))["path"]; got != "small" {
		t.Fatalf("path = %v", got)
	}
}

func TestNodePanicFailsTheRunNotTheWorker(t *testing.T) {
	f := engine.NewFlow[map[string]any]("p").
		Node("boom", func(context.Context, *engine.Node[map[string]any]) error { panic("kaboom") }).
		Start("boom").MustBuild()
	h := enginetest.New(t, f)
	run := h.Start(nil)
	if cp := h.Checkpoint(run); cp.Status != engine.Failed || !strings.Contains(cp.Error, "kaboom") {
		t.Fatalf("cp = %s %q", cp.Status, cp.Error)
	}
}

func TestLoopingFlowFailsInsteadOfSpinning(t *testing.T) {
	f := engine.NewFlow[map[string]any]("loop").
		Node("a", func(context.Context, *engine.Node[map[string]any]) error { return nil }).
		Start("a").Edge("a", "a").MustBuild()
	h := enginetest.New(t, f)
	run := h.Start(nil)
	if cp := h.Checkpoint(run); cp.Status != engine.Failed || !strings.Contains(cp.Error, "loop") {
		t.Fatalf("cp = %s %q", cp.Status, cp.Error)
	}
}

func TestNodeErrorFailsRun(t *testing.T) {
	f := engine.NewFlow[map[string]any]("e").
		Node("n", func(context.Context, *engine.Node[map[string]any]) error { return errors.New("upstream down") }).
		Start("n").MustBuild()
	h := enginetest.New(t, f)
	run := h.Start(nil)
	evs := h.Events(run)
	if last := evs[len(evs)-1]; last.Kind != "failed" || last.Data["error"] != "upstream down" {
		t.Fatalf("last = %s %v", last.Kind, last.Data)
	}
}

func raw(t *testing.T, m map[string]any) map[string]json.RawMessage {
	t.Helper()
	out := map[string]json.RawMessage{}
	for k, v := range m {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out[k] = b
	}
	return out
}

func TestMergeAndAppendReducers(t *testing.T) {
	f := engine.NewFlow[map[string]any]("r").
		Node("n", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			if err := n.Update(engine.Update{"prefs": map[string]any{"b": 2}, "tags": "x", "name": "new"}); err != nil {
				return err
			}
			return n.Set("tags", []string{"y", "z"})
		}).
		Start("n").Reducer("prefs", engine.Merge).Reducer("tags", engine.Append).MustBuild()
	h := enginetest.New(t, f)
	st := h.State(h.Start(map[string]any{"prefs": map[string]any{"a": 1, "b": 1}, "tags": []string{"w"}, "name": "old"}))
	if p := st["prefs"].(map[string]any); p["a"] != 1.0 || p["b"] != 2.0 {
		t.Fatalf("prefs = %v, want merged", p)
	}
	if got := st["tags"].([]any); len(got) != 4 || got[0] != "w" || got[3] != "z" {
		t.Fatalf("tags = %v, want appended", got)
	}
	if st["name"] != "new" {
		t.Fatalf("name = %v, want replaced", st["name"])
	}
}

func TestMergeIntoANonObjectFailsNamingTheField(t *testing.T) {
	f := engine.NewFlow[map[string]any]("r").
		Node("n", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			return n.Set("prefs", []int{1})
		}).
		Start("n").Reducer("prefs", engine.Merge).MustBuild()
	h := enginetest.New(t, f)
	cp := h.Checkpoint(h.Start(map[string]any{"prefs": map[string]any{"a": 1}}))
	if cp.Status != engine.Failed || !strings.Contains(cp.Error, "state.prefs") {
		t.Fatalf("status %s error %q", cp.Status, cp.Error)
	}
}

func TestStartWithoutRunIDDerivesOneFromTheEvent(t *testing.T) {
	h := enginetest.New(t, booking.Flow())
	start := engine.Start{Flow: booking.Name, Inbound: engine.Inbound{EventID: "e-1", Source: "/agent"}}
	first, err := h.Runner.Start(t.Context(), start)
	if err != nil || first.Run == "" || first.Refused != nil {
		t.Fatalf("first: %+v %v", first, err)
	}
	again, err := h.Runner.Start(t.Context(), start)
	if err != nil || again.Run != first.Run || !again.Duplicate {
		t.Fatalf("redelivered start: %+v %v, want the same run %s as a duplicate", again, err, first.Run)
	}
	other, err := h.Runner.Start(t.Context(), engine.Start{Flow: booking.Name, Run: first.Run, Inbound: engine.Inbound{EventID: "e-2"}})
	if err != nil || other.Refused == nil || other.Refused.Code != protocol.CodeRunExists || other.DeadLetter == "" {
		t.Fatalf("start of an existing run: %+v %v", other, err)
	}
}

func TestStartOfUnknownFlowIsRefusedNamingTheKnownOnes(t *testing.T) {
	h := enginetest.New(t, booking.Flow())
	out, err := h.Runner.Start(t.Context(), engine.Start{Flow: "nosuch", Run: "r-1", Inbound: engine.Inbound{EventID: "e"}})
	if err != nil || out.Refused == nil || out.Refused.Code != protocol.CodeUnknownFlow || !strings.Contains(out.Refused.Message, "booking") {
		t.Fatalf("%+v %v", out, err)
	}
}

func TestRunnerConfigIsValidated(t *testing.T) {
	cases := []struct {
		name string
		cfg  engine.Config
		want string
	}{
		{"no store", engine.Config{Publisher: enginetest.NewPublisher(), Secret: make([]byte, 32)}, "Store"},
		{"no publisher", engine.Config{Store: enginetest.NewStore(), Secret: make([]byte, 32)}, "Publisher"},
		{"short secret", engine.Config{Store: enginetest.NewStore(), Publisher: enginetest.NewPublisher(), Secret: []byte("x")}, "Secret"},
		{"same flow twice", engine.Config{Store: enginetest.NewStore(), Publisher: enginetest.NewPublisher(), Secret: make([]byte, 32),
			Flows: []*engine.Flow{booking.Flow(), booking.Flow()}}, "twice"},
	}
	for _, tc := range cases {
		if _, err := engine.NewRunner(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %s", tc.name, err, tc.want)
		}
	}
}

func TestStartDeliveredTwiceAsFirstDeliveryRunsItsStepOnce(t *testing.T) {
	calls := 0
	f := engine.NewFlow[map[string]any]("once").
		Node("n", func(ctx context.Context, n *engine.Node[map[string]any]) error {
			if _, err := engine.Step(ctx, n, "email", func(context.Context) (int, error) { calls++; return calls, nil }); err != nil {
				return err
			}
			_, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{{Field: "x", Question: "x?"}}})
			return err
		}).Start("n").MustBuild()
	h := enginetest.New(t, f)
	start := engine.Start{Flow: "once", Run: "r-1", Inbound: engine.Inbound{EventID: "e-1", FirstDelivery: true}}
	for i := range 2 {
		out, err := h.Runner.Start(t.Context(), start)
		if err != nil || out.Refused != nil || out.Duplicate != (i == 1) {
			t.Fatalf("delivery %d: %+v %v", i, out, err)
		}
	}
	other := start
	other.EventID = "e-2"
	if out, _ := h.Runner.Start(t.Context(), other); out.Refused == nil || out.Refused.Code != protocol.CodeRunExists {
		t.Fatalf("another start of the run: %+v", out)
	}
	if calls != 1 {
		t.Fatalf("step ran %d times", calls)
	}
}
