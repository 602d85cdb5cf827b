package engine

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/replica"
	"github.com/kmirror/kmirror/engine/store"
)

// Reachability is whether a cluster answers, as an engine last saw it.
type Reachability struct {
	Down      bool      // checks in a row failed: the cluster does not answer (false also when unknown)
	DownSince time.Time // the first failed check of the outage; zero while up
	LastOK    time.Time // the last answered check; zero before the first
	Error     string    // why the last check failed, "" while up
}

// ErrSourceUnreachable is replica.ErrSourceUnreachable.
var ErrSourceUnreachable = replica.ErrSourceUnreachable

// SourceUnreachableError is replica.SourceUnreachableError.
type SourceUnreachableError = replica.SourceUnreachableError

// downAfter is how many checks in a row must fail before a cluster counts
// as unreachable: one failed check may be a leader election or a slow
// answer.
const downAfter = 2

// reach tracks one cluster's reachability from the results of periodic
// checks (the mirror's watcher) and of work that talks to it.
type reach struct {
	mu       sync.Mutex
	failures int
	first    time.Time // first failure of the current run of failures
	down     bool
	lastOK   time.Time
	err      string
}

// ok records an answer; it reports whether the cluster was down until now.
func (r *reach) ok(now time.Time) (wasDown bool, downFor time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	wasDown, downFor = r.down, now.Sub(r.first)
	r.failures, r.down, r.err, r.lastOK = 0, false, "", now
	return wasDown, downFor
}

// failed records a check that was not answered; it reports whether the
// cluster has just become unreachable.
func (r *reach) failed(now time.Time, err error) (wentDown bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failures == 0 {
		r.first = now
	}
	r.failures++
	r.err = err.Error()
	if !r.down && r.failures >= downAfter {
		r.down = true
		return true
	}
	return false
}

// markDown records a cluster found unreachable at once (a mirror opened
// while its source does not answer).
func (r *reach) markDown(now time.Time, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.down {
		r.down, r.first, r.failures = true, now, downAfter
	}
	r.err = err.Error()
}

// state returns the reachability for a snapshot.
func (r *reach) state() Reachability {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.down {
		return Reachability{LastOK: r.lastOK}
	}
	return Reachability{Down: true, DownSince: r.first, LastOK: r.lastOK, Error: r.err}
}

// report is the reachability as an instance's heartbeat states it.
func (r *reach) report() store.Reach {
	st := r.state()
	switch {
	case st.Down:
		return store.Reach{State: store.ReachUnreachable, At: st.DownSince.UTC(), Error: st.Error}
	case !st.LastOK.IsZero():
		return store.Reach{State: store.ReachReachable, At: st.LastOK.UTC()}
	}
	return store.Reach{State: store.ReachUnknown}
}

// sourceDown returns the error a partition fails with while the mirror's
// source is unreachable, nil while it answers.
func (m *mirror) sourceDown() *SourceUnreachableError {
	st := m.srcReach.state()
	if !st.Down {
		return nil
	}
	return &SourceUnreachableError{Mirror: m.cfg.Name, Bootstrap: m.cfg.SourceBootstrap, Since: st.DownSince, Err: st.Error}
}

// sourceChecked takes the result of the watcher's look at the source: the
// partitions learn that it went away (FAILED, retryable, naming it) and
// that it came back (they retry at once).
func (m *mirror) sourceChecked(rs []*runner, now time.Time, err error) {
	if err == nil {
		if wasDown, downFor := m.srcReach.ok(now); wasDown {
			m.e.emit(LevelInfo, m.cfg.Name, "", -1, fmt.Sprintf("source cluster %s answers again after %s: partitions retry now",
				strings.Join(m.cfg.SourceBootstrap, ","), downFor.Round(time.Second)), clusterAttr("source"))
			for _, r := range rs {
				if r.Stats().FailedFor(partition.CauseSourceUnreachable) {
					r.Send(partition.SourceReachable{})
				}
			}
		}
		return
	}
	if m.srcReach.failed(now, err) {
		down := m.sourceDown()
		m.e.emit(LevelError, m.cfg.Name, "", -1, down.Error()+"; its partitions are FAILED until it answers, and a stop needs only the destination", clusterAttr("source"))
	}
	if down := m.sourceDown(); down != nil {
		for _, r := range rs {
			if r.Stats().Active() {
				r.Inject(down)
			}
		}
	}
}

// outage corrects the lag of a mirror's partitions while its source does
// not answer: the records behind are unknown (the source's high watermark
// is), and the time behind grows from the last answer, so a caught-up
// partition does not read "0s" through an outage. Paused and stopped
// partitions are left as they are: nothing is expected of them.
func outage(ps []PartitionSnapshot, st Reachability, now time.Time) {
	since := st.LastOK
	if since.IsZero() {
		since = st.DownSince
	}
	behind := now.Sub(since)
	for i := range ps {
		p := &ps[i]
		switch p.State {
		case partition.Paused, partition.Pausing, partition.Stopped, partition.Stopping:
			continue
		case partition.Unknown, partition.LogAlignment, partition.EpochFencing, partition.Mirroring, partition.Failed, partition.ULERecovery:
		}
		p.SourceHWM, p.Lag = -1, 0
		p.LagAtContact = p.LagTime
		p.LagTime = max(p.LagTime, behind)
	}
}
