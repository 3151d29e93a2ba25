package mcpserver_test

import (
	"encoding/json"
	"testing"

	"github.com/interlockhq/interlock/mcpserver"
)

// toolListBudget is the most model context the tool list may take: the
// JSON of tools/list (names, descriptions, input and output schemas).
const toolListBudget = 9500

// TestToolListFitsItsBudget measures what the tool list costs a model's
// context, tool by tool, and keeps it within toolListBudget.
func TestToolListFitsItsBudget(t *testing.T) {
	t.Parallel()
	m := connect(t, mcpserver.Config{Flows: flows})
	res, err := m.cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	total, err := json.Marshal(res.Tools)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		b, _ := json.Marshal(tool)
		t.Logf("%-22s %6d bytes", tool.Name, len(b))
	}
	whole, _ := json.Marshal(res)
	t.Logf("tools: %d bytes, the whole tools/list result %d (budget %d)", len(total), len(whole), toolListBudget)
	if len(total) > toolListBudget {
		t.Errorf("the tool list takes %d bytes of model context, over its budget of %d: cut descriptions and schemas to what a model needs", len(total), toolListBudget)
	}
}
