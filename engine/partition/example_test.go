package partition_test

import (
	"fmt"
	"time"

	"github.com/kmirror/kmirror/engine/partition"
)

// The engine's loop for one partition: apply an event, persist, then run the
// actions, tagging the work it starts with the new StateEpoch.
func ExampleApply() {
	var s partition.Status
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	events := []func(partition.Status) partition.Event{
		func(partition.Status) partition.Event { return partition.Start{} },
		func(s partition.Status) partition.Event {
			return partition.Error{Epoch: s.StateEpoch, Err: "broker 2 not available", Retryable: true,
				Cause: partition.CauseTransient, Now: now, Jitter: 0.5}
		},
		func(s partition.Status) partition.Event { return partition.Tick{Now: s.NextRetry} },
		func(partition.Status) partition.Event { return partition.Resume{} },
	}
	for _, mk := range events {
		next, actions, err := partition.Apply(s, mk(s))
		if err != nil {
			fmt.Println("rejected:", err)
			continue
		}
		for _, a := range actions {
			if e, ok := a.(partition.Emit); ok {
				fmt.Println(e.Message)
			}
		}
		s = next
	}
	// Output:
	// UNKNOWN → LOG_ALIGNMENT: mirroring started
	// LOG_ALIGNMENT → FAILED: broker 2 not available (retry 1 of 20 in 50ms)
	// FAILED → LOG_ALIGNMENT: retry 1 of 20
	// rejected: resume rejected in state LOG_ALIGNMENT: not paused: mirroring is running
}
