// Package examples holds Interlock's example flows, which `interlock
// serve` registers, and the example rules of the tool-call gate.
package examples

import (
	_ "embed"

	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/examples/refund"
	"github.com/interlockhq/interlock/gate"
)

// Flows returns every example flow.
func Flows() []*engine.Flow {
	return []*engine.Flow{booking.Flow(), refund.Flow()}
}

// GateRulesFile is the example gate rules' file, as `interlock serve
// --gate-rules` takes it from the repository's root.
const GateRulesFile = "examples/gate/rules.yaml"

//go:embed gate/rules.yaml
var gateRules []byte

// GateRules returns the example rules of the tool-call gate
// (examples/gate/rules.yaml): refunds over $500 wait for a supervisor.
func GateRules() (*gate.RuleSet, error) { return gate.Parse(gateRules, GateRulesFile) }
