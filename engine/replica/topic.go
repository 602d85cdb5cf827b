package replica

import (
	"context"
	"encoding/base64"
	"sync"
)

// TopicIDString is a topic id as Kafka's tools show it (URL-safe base64
// without padding), "" for the zero id (unknown).
func TopicIDString(id [16]byte) string {
	if id == ([16]byte{}) {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// TopicCancel is one topic's runners and the context that ends them.
type TopicCancel struct {
	Ctx     context.Context
	Cancel  context.CancelFunc
	Running sync.WaitGroup // the runners still running
	// ByPartition are the topic's runners by partition number (nil
	// where none); they are told when ctx ends (ContextEnded): an idle
	// runner waits on its inbox alone (see mirrorNext), and a runner's
	// work context is not a child of ctx (startWork). Guarded by
	// mirror.mu.
	ByPartition []*Runner
	// Writer is the identity the topic's partitions append with
	// (writer.go): the instance bumps its epoch once for them all.
	Writer TopicWriter
}

// Runners appends the topic's runners to out, by partition. m.mu is held.
func (tc *TopicCancel) Runners(out []*Runner) []*Runner {
	for _, r := range tc.ByPartition {
		if r != nil {
			out = append(out, r)
		}
	}
	return out
}
