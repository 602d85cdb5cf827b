package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine/logging"
	"github.com/kmirror/kmirror/engine/partition"
	"github.com/kmirror/kmirror/engine/store"
)

// An Observer shows what the instances sharing a destination do without
// being one of them (DESIGN §4.3, §8): it reads every shard of
// __mirror_state as a plain reader (never a member of the instances'
// group, so watching never moves a shard), reads the instances'
// heartbeats, and lists end offsets on the destination and on each
// mirror's source itself. It never creates a topic, and the only records
// it writes are the command records the CLI's --pause, --resume, --stop
// and --recover write; none when read-only. It publishes Snapshot values
// like an Engine, so the console renders either.
type Observer struct {
	cfg  ObserverConfig
	log  *slog.Logger
	now  func() time.Time
	dst  *cluster
	rd   *kgo.Client   // the __mirror_state reader
	w    *store.Writer // nil when read-only
	wcl  *kgo.Client
	recs chan []*kgo.Record
	snap atomic.Pointer[Snapshot]
	// refreshes counts completed looks, published or not.
	refreshes atomic.Int64
	evs       *eventQueue
	startups  startups // the instances' partitions coming up, for the start-up summary
	ctx       context.Context
	stop      context.CancelFunc
	wg        sync.WaitGroup
	close     sync.Once
}

// ObserverConfig configures an Observer.
type ObserverConfig struct {
	Destination     []string
	DestinationOpts []kgo.Opt // security settings for the destination
	// ReadOnly refuses every command: the observer writes nothing at all.
	ReadOnly bool
	// Interval is how often the observer looks at the clusters, default 1s.
	Interval time.Duration
	// PollTimeout bounds one look at one cluster, default 3s: a source
	// that does not answer costs a refresh of that mirror, never the
	// others' or the console's.
	PollTimeout time.Duration
	// Ticks, when set, replaces Interval: the observer refreshes once per
	// value received (tests count refreshes with it).
	Ticks  <-chan time.Time
	Logger *slog.Logger
	Now    func() time.Time
}

// ErrReadOnly: the observer was started read-only and records no command.
var ErrReadOnly = errors.New("read-only: no command is recorded")

// Observer defaults.
const (
	DefaultObserveInterval = time.Second
	DefaultObserveTimeout  = 3 * time.Second
)

// NewObserver starts observing the destination. It does not wait for the
// destination to answer: an unreachable destination is what the first
// snapshots say, with the observer retrying every interval.
func NewObserver(ctx context.Context, cfg ObserverConfig) (*Observer, error) {
	if len(cfg.Destination) == 0 {
		return nil, errors.New("observer: no destination bootstrap servers")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultObserveInterval
	}
	if cfg.PollTimeout <= 0 {
		cfg.PollTimeout = DefaultObserveTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = logging.Discard()
	}
	dstLog := log.With(logging.Cluster, "destination")
	cfg.DestinationOpts = append(slices.Clone(cfg.DestinationOpts), kgo.WithLogger(logging.Kgo(dstLog)))
	dst, err := newCluster("destination", cfg.Destination, "kmirror-observer", slices.Concat(cfg.DestinationOpts, []kgo.Opt{kgo.WithLogger(logging.KgoRaw(dstLog))})...)
	if err != nil {
		return nil, err
	}
	base := append([]kgo.Opt{kgo.SeedBrokers(cfg.Destination...), kgo.ClientID("kmirror-observer"), kgo.DisableClientMetrics()}, cfg.DestinationOpts...)
	// A direct consumer of every partition: no group, no commits, and
	// franz-go never asks a broker to create a topic it consumes.
	rd, err := kgo.NewClient(append(slices.Clone(base),
		kgo.ConsumeTopics(store.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), noFetchSession)...)
	if err != nil {
		dst.close()
		return nil, fmt.Errorf("observer: %w", err)
	}
	o := &Observer{cfg: cfg, log: log, now: cfg.Now, dst: dst, rd: rd, recs: make(chan []*kgo.Record, 16)}
	if !cfg.ReadOnly {
		if o.wcl, err = kgo.NewClient(append(slices.Clone(base), store.WriterOpts()...)...); err != nil {
			rd.Close()
			dst.close()
			return nil, fmt.Errorf("observer: %w", err)
		}
		o.w = store.NewWriter(o.wcl)
	}
	o.ctx, o.stop = context.WithCancel(context.WithoutCancel(ctx))
	o.evs = newEventQueue(o.ctx, &o.wg, 10_000)
	o.snap.Store(&Snapshot{}) // Taken zero: nothing read yet
	o.wg.Go(func() { o.read(o.ctx) })
	o.wg.Go(func() { o.loop(o.ctx) })
	return o, nil
}

// Close stops observing and closes every connection.
func (o *Observer) Close() {
	o.close.Do(func() {
		o.stop()
		o.rd.Close() // ends a PollFetches in flight
		o.wg.Wait()
		if o.wcl != nil {
			o.wcl.Close()
		}
		o.dst.close()
	})
}

// Snapshot returns the latest published snapshot. Until __mirror_state has
// been read to the end it has a zero Taken: showing half-replayed states
// (or "no live instance" before the heartbeats are read) would be untrue.
func (o *Observer) Snapshot() Snapshot { return *o.snap.Load() }

// Events delivers what the observer saw change: partition states, the
// clusters' reachability, instances lost and back.
func (o *Observer) Events() <-chan Event { return o.evs.out }

// Control records an operator command in __mirror_state exactly as the
// CLI does (a fresh read of the catalog, then SetDesired); the instance
// owning the partitions executes it. Read-only, it records nothing.
func (o *Observer) Control(ctx context.Context, cmd Command) error {
	if o.w == nil {
		return fmt.Errorf("%s %s: %w", cmd.Kind, cmd.Mirror, ErrReadOnly)
	}
	cat, err := store.ReadAll(ctx, append([]kgo.Opt{kgo.SeedBrokers(o.cfg.Destination...), kgo.ClientID("kmirror-observer")}, o.cfg.DestinationOpts...), nil)
	if errors.Is(err, store.ErrNoStateTopic) {
		return opErr("mirror %s does not exist", cmd.Mirror)
	}
	if err != nil {
		return err
	}
	done, err := SetDesired(ctx, o.w, cat, cmd, o.now())
	if err != nil {
		return err
	}
	o.emit(LevelInfo, cmd.Mirror, "", -1, fmt.Sprintf("console: %s recorded for %d topics; their owning instances execute it", cmd.Kind, len(done)))
	return nil
}

func (o *Observer) emit(level EventLevel, mirror, topic string, p int32, msg string, attrs ...slog.Attr) {
	ev := Event{Time: o.now(), Level: level, Mirror: mirror, Topic: topic, Partition: p, Message: msg}
	o.evs.push(ev)
	logEvent(o.log, slogLevel(level), ev, attrs...)
}

// read hands every record of __mirror_state to the loop, which owns the
// catalog.
func (o *Observer) read(ctx context.Context) {
	defer close(o.recs)
	for {
		fs := o.rd.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		fs.EachError(func(t string, p int32, err error) {
			o.log.Warn("read "+store.Topic, logging.Partition, p, logging.Error, err)
		})
		if recs := fs.Records(); len(recs) > 0 {
			select {
			case o.recs <- recs:
			case <-ctx.Done():
				return
			}
		}
	}
}

// loop owns the catalog and the observer's memory of earlier looks; it
// applies records as they arrive and refreshes every interval.
func (o *Observer) loop(ctx context.Context) {
	st := newObserveState()
	timer := time.NewTimer(0)
	defer timer.Stop()
	ticks := o.cfg.Ticks
	if ticks != nil {
		timer.Stop()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case recs, ok := <-o.recs:
			if !ok {
				return
			}
			o.apply(st, recs)
		case <-timer.C:
			o.refreshOnce(ctx, st)
			timer.Reset(o.cfg.Interval)
		case <-ticks:
			o.refreshOnce(ctx, st)
		}
	}
}

func (o *Observer) refreshOnce(ctx context.Context, st *observeState) {
	o.drain(st)
	if snap, ok := o.refresh(ctx, st); ok {
		o.snap.Store(&snap)
	}
	o.refreshes.Add(1)
}

// Refreshes counts the looks taken at the clusters so far.
func (o *Observer) Refreshes() int64 { return o.refreshes.Load() }

// drain applies the records already read, so a refresh sees them.
func (o *Observer) drain(st *observeState) {
	for {
		select {
		case recs, ok := <-o.recs:
			if !ok {
				return
			}
			o.apply(st, recs)
		default:
			return
		}
	}
}

// apply folds records into the catalog; once caught up it tells of the
// partition state changes they carry.
func (o *Observer) apply(st *observeState, recs []*kgo.Record) {
	for _, r := range recs {
		st.consumed[r.Partition] = r.Offset + 1
		k, err := store.ParseKey(r.Key)
		var before store.PartitionRecord
		had := false
		if err == nil && k.Kind == store.KindPartition {
			before, had = st.cat.Partitions[store.PartitionRef{Mirror: k.Mirror, Topic: k.Topic, Partition: k.Partition}]
		}
		k, changed, err := st.cat.Apply(r.Key, r.Value)
		if err != nil {
			o.log.Warn("skip a "+store.Topic+" record", logging.Key, string(r.Key), logging.Error, err)
			continue
		}
		if !changed || !st.caughtUp || k.Kind != store.KindPartition {
			continue
		}
		after, ok := st.cat.Partitions[store.PartitionRef{Mirror: k.Mirror, Topic: k.Topic, Partition: k.Partition}]
		if ok && (!had || before.State != after.State) {
			lvl := LevelInfo
			msg := fmt.Sprintf("%s (instance %s)", after.State, after.Owner)
			if had {
				msg = fmt.Sprintf("%s → %s (instance %s)", before.State, after.State, after.Owner)
			}
			if after.Error != "" {
				lvl, msg = LevelWarn, msg+": "+after.Error
			}
			from := partition.Unknown
			if had {
				from = before.State
			}
			logState(o.log, &o.startups, o.evs, Event{Time: o.now(), Level: lvl, Mirror: k.Mirror, Topic: k.Topic, Partition: k.Partition, Message: msg}, from, after.State)
		}
	}
}
