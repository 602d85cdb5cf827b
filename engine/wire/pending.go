package wire

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Pending is a request that has been written to the broker and whose
// response has not necessarily arrived yet. The connection's reader
// goroutine is its only writer: it stores the outcome and then closes done,
// so the outcome is immutable once Done is closed.
type Pending struct {
	key            int16
	version        int16
	corrID         int32
	flexibleHeader bool          // response header carries tagged fields
	brokerWait     time.Duration // how long the request lets the broker wait before answering
	done           chan struct{}

	resp kmsg.Response // decoded into by the reader; valid once done is closed
	err  error
	at   time.Time // when the outcome arrived; valid once done is closed
}

func newPending(req kmsg.Request) *Pending {
	key := req.Key()
	var brokerWait time.Duration
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		brokerWait = time.Duration(r.TimeoutMillis) * time.Millisecond
	case *kmsg.FetchRequest:
		brokerWait = time.Duration(r.MaxWaitMillis) * time.Millisecond
	}
	return &Pending{
		brokerWait: brokerWait,
		key:        key,
		version:    req.GetVersion(),
		// The ApiVersions response header stays v0 even when the body
		// is flexible, so that a client that does not yet know the
		// broker's versions can always parse it.
		flexibleHeader: req.IsFlexible() && key != apiVersionsKey,
		resp:           req.ResponseKind(),
		done:           make(chan struct{}),
	}
}

// complete records the outcome; only the reader goroutine calls it, once.
func (p *Pending) complete(resp kmsg.Response, err error) {
	p.resp, p.err, p.at = resp, err, time.Now()
	if err != nil {
		p.resp = nil
	}
	close(p.done)
}

// CompletedAt is when the response was read or the request failed: a
// round trip measured with it does not include how long its issuer took
// to look. Valid once Done is closed.
func (p *Pending) CompletedAt() time.Time { return p.at }

// Done is closed once the response has been read or the request failed.
// Engines that juggle several in-flight requests can select on it.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Wait blocks until the response has arrived or the request failed, or ctx
// ends. A Wait abandoned through ctx does not cancel the request: it stays
// in flight, its response is still read in order and kept in the Pending
// (Wait may be called again), and the connection stays usable. A connection failure fails every pending request
// with an error matching ErrConnClosed and its cause.
func (p *Pending) Wait(ctx context.Context) (kmsg.Response, error) {
	select {
	case <-p.done: // an outcome already there wins over an ended ctx
		return p.resp, p.err
	default:
	}
	select {
	case <-p.done:
		return p.resp, p.err
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for %s v%d response: %w", kmsg.NameForKey(p.key), p.version, context.Cause(ctx))
	}
}
