// Package examples holds Interlock's example flows; `interlock serve`
// registers them all.
package examples

import (
	"github.com/interlockhq/interlock/engine"
	"github.com/interlockhq/interlock/examples/booking"
	"github.com/interlockhq/interlock/examples/refund"
)

// Flows returns every example flow.
func Flows() []*engine.Flow {
	return []*engine.Flow{booking.Flow(), refund.Flow()}
}
