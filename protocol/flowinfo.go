package protocol

import (
	"encoding/json"
	"fmt"
	"time"
)

// FlowKeyPrefix starts the keys, in the live-configuration bucket
// (<prefix>_config), under which the workers say what they know of each
// flow they serve: flows.<flow>, a [FlowInfo].
const FlowKeyPrefix = "flows."

// FlowKey returns the live-configuration key of a flow's [FlowInfo].
func FlowKey(flow string) string { return FlowKeyPrefix + flow }

// FlowInfo is what the workers serving a flow say of it, under
// [FlowKey]: enough for a surface to read a person's field=value as the
// flow's state takes it (see [Value]). Each worker writes it when it
// starts; the newest worker's word stands.
type FlowInfo struct {
	// Flow is the flow's name.
	Flow string `json:"flow"`
	// Version is the flow's version (declared, or derived from its
	// structure) of the worker that wrote it last.
	Version string `json:"version,omitempty"`
	// State maps the state's fields (field, and parent.child one level
	// down) to their JSON types, where the flow's state type tells.
	State map[string]string `json:"state,omitempty"`
}

// DecodeFlowInfo decodes the value of a [FlowKey].
func DecodeFlowInfo(data []byte) (FlowInfo, error) {
	var fi FlowInfo
	if err := json.Unmarshal(data, &fi); err != nil {
		return FlowInfo{}, fmt.Errorf("protocol: not a flow description: %w", err)
	}
	if fi.Flow == "" {
		return FlowInfo{}, fmt.Errorf("protocol: a flow description without a flow name")
	}
	return fi, nil
}

// Worker is a running worker process's entry in the workers bucket
// (wire.Names.WorkersBucket), under a key of its own: what it runs. The
// worker writes it again every few seconds; it is gone a little after the
// process stops (or at once, when it stops cleanly).
type Worker struct {
	// Instance names the process (interlock.Config.Instance).
	Instance string `json:"instance"`
	// Flows maps each flow the process runs to the flow's version.
	Flows map[string]string `json:"flows"`
	// Migrates lists, by flow, the earlier versions whose runs the
	// process carries on by its flow's migrations ("*": every version).
	Migrates map[string][]string `json:"migrates,omitempty"`
	// Since is when the process started; At when it last wrote the entry.
	Since time.Time `json:"since"`
	At    time.Time `json:"at"`
}

// AnyVersion, in [Worker.Migrates], is every version of the flow.
const AnyVersion = "*"

// Carries reports whether the process carries on runs of version of
// flow: it runs that version, or migrates from it.
func (w Worker) Carries(flow, version string) bool {
	if v, ok := w.Flows[flow]; !ok {
		return false
	} else if v == version {
		return true
	}
	for _, m := range w.Migrates[flow] {
		if m == version || m == AnyVersion {
			return true
		}
	}
	return false
}
