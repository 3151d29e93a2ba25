// Package booking is Interlock's example flow: it collects a course booking
// from a person, one interrupt at a time, and shows every behaviour of
// question and choice interrupts: a validator that rejects and normalises,
// hidden context, several questions in one interrupt, suggestions, nested
// fields, a multiple choice, and auto-skip of fields given at start.
package booking

import (
	"context"
	"strings"

	"github.com/interlockhq/interlock/engine"
)

// Name is the flow's name.
const Name = "booking"

// State is the booking being collected.
type State struct {
	Email  string   `json:"email,omitempty"`
	Name   string   `json:"name,omitempty"`
	Phone  string   `json:"phone,omitempty"`
	Level  string   `json:"level,omitempty"`
	Driver Driver   `json:"driver,omitzero"`
	Topics []string `json:"topics,omitempty"`
	// Notes collects remarks sent with resumes ("update"); it is appended
	// to, never replaced.
	Notes []string `json:"notes,omitempty"`
}

// Driver is the person who will drive to the course.
type Driver struct {
	Name    string `json:"name,omitempty"`
	License string `json:"license,omitempty"`
}

// Levels are the levels a booking may take.
var levels = []string{"beginner", "intermediate", "advanced"}

// Flow returns the booking flow.
func Flow() *engine.Flow {
	return engine.NewFlow[State](Name).
		Node("ask_email", askEmail).
		Node("ask_contact", askContact).
		Node("ask_level", askLevel).
		Node("ask_driver", askDriver).
		Node("pick_topics", pickTopics).
		Start("ask_email").
		Edge("ask_email", "ask_contact").
		Edge("ask_contact", "ask_level").
		Edge("ask_level", "ask_driver").
		Edge("ask_driver", "pick_topics").
		Edge("pick_topics", engine.End).
		Reducer("notes", engine.Append).
		MustBuild()
}

func askEmail(ctx context.Context, n *engine.Node[State]) error {
	_, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{{
		Field:    "email",
		Question: "What's your email?",
		Context:  "Politely reject generic domains like gmail.com.",
		Validate: validateEmail,
	}}})
	return err
}

func validateEmail(_ context.Context, v any) (engine.Update, error) {
	s, _ := v.(string)
	s = strings.ToLower(strings.TrimSpace(s))
	if !strings.Contains(s, "@") {
		return nil, engine.Reject("That doesn't look like an email.")
	}
	return engine.Update{"email": s}, nil
}

func askContact(ctx context.Context, n *engine.Node[State]) error {
	_, err := n.Ask(ctx, engine.Questions{
		Context: "Ask both in one natural message.",
		Questions: []engine.Question{
			{Field: "name", Question: "What's your name?"},
			{Field: "phone", Question: "What's your phone number?"},
		},
	})
	return err
}

func askLevel(ctx context.Context, n *engine.Node[State]) error {
	_, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{{
		Field:       "level",
		Question:    "What's your level?",
		Suggestions: levels,
		Validate: func(_ context.Context, v any) (engine.Update, error) {
			s, _ := v.(string)
			s = strings.ToLower(strings.TrimSpace(s))
			for _, l := range levels {
				if s == l {
					return engine.Update{"level": s}, nil
				}
			}
			return nil, engine.Reject("Please choose beginner, intermediate or advanced.")
		},
	}}})
	return err
}

func askDriver(ctx context.Context, n *engine.Node[State]) error {
	_, err := n.Ask(ctx, engine.Questions{Questions: []engine.Question{
		{Field: "driver.name", Question: "Who will drive?"},
		{Field: "driver.license", Question: "What's the driver's license number?"},
	}})
	return err
}

func pickTopics(ctx context.Context, n *engine.Node[State]) error {
	ids, err := n.Choose(ctx, engine.Choice{
		Question: "Which topics interest you?",
		Options: []engine.Option{
			{ID: "product", Label: "Product"},
			{ID: "design", Label: "Design"},
			{ID: "engineering", Label: "Engineering"},
		},
		Multiple: true,
	})
	if err != nil {
		return err
	}
	return n.Set("topics", ids)
}
