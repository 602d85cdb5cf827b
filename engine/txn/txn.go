// Package txn mirrors transactions onto a destination partition at identical
// offsets.
//
// A client cannot write a source transaction's batches as they are: the
// destination rejects a transactional batch from a producer its coordinator
// does not know, and it never accepts a control batch (a commit or abort
// marker) from a client. So kmirror owns destination transactional producers:
// one per (mirrored partition, source producer id), with a transactional id
// derived from both (TxnID). Each destination transaction therefore spans
// exactly one partition, and a marker lands where kmirror asks for it, when
// it asks: the source's data batches are appended inside the mapped
// producer's transaction, and the source's marker becomes an EndTxn with the
// same outcome, issued when the destination log end is at the marker's source
// offset.
//
// A Mapper serves one destination partition and belongs to that partition's
// runner goroutine: it has no locks and must not be shared.
package txn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kmirror/kmirror/engine/batch"
	"github.com/kmirror/kmirror/engine/logging"
)

// Config describes the partition a Mapper serves.
type Config struct {
	Mirror    string
	Topic     string
	Partition int32
	// TopicID is the destination topic id; when set, a marker search checks
	// the topic was not recreated under the same name.
	TopicID [16]byte
	// Client reaches the destination cluster. kgo routes the transaction
	// requests to the transaction coordinator and the partition requests
	// (ListOffsets, DescribeProducers) to the leader.
	Client *kgo.Client
	// TxnTimeout is every mirrored transaction's timeout. Zero means the
	// destination's transaction.max.timeout.ms, or 60s when it cannot be read.
	TxnTimeout time.Duration
	// Now is the clock for idle tracking; nil means time.Now.
	Now func() time.Time
	// Jitter draws the full-jitter fraction in [0,1) of every retry and
	// poll wait; nil means math/rand's.
	Jitter func() float64
	// Logger, if set, hears of transactions adopted from a previous run.
	Logger *slog.Logger
}

// Log attribute keys (their names live in package logging).
const (
	attrMirror        = logging.Mirror
	attrTopic         = logging.Topic
	attrPartition     = logging.Partition
	attrTxnID         = logging.TxnID
	attrProducerID    = logging.ProducerID
	attrProducerEpoch = logging.ProducerEpoch
	attrNextSequence  = logging.NextSequence
	attrFromOffset    = logging.Offset
	attrErr           = logging.Error
	attrTimeout       = logging.Timeout
)

// Producer is the persisted state of one mapped producer. Only producers
// with an open transaction need persisting (see Open and Restore).
type Producer struct {
	SourcePID   int64  // the source producer whose transactions this one mirrors
	TxnID       string // the destination transactional id
	PID         int64  // destination producer id
	Epoch       int16  // destination producer epoch
	NextSeq     int32  // sequence of the next batch appended
	Open        bool   // a destination transaction is open on the partition
	FirstOffset int64  // first offset of the open transaction's data; -1 if none yet
}

// producer is a mapped producer in memory.
type producer struct {
	Producer
	lastUsed time.Time
	aborted  *AbortedByCoordinatorError // sticky once seen
}

// Mapper maps the source's transactional producers on one partition to
// kmirror's destination transactional producers.
type Mapper struct {
	cfg       Config
	log       *slog.Logger
	producers map[int64]*producer // by source producer id
	timeout   time.Duration       // resolved transaction timeout
	mode      addMode
	// epochPerTxn: the destination ends transactions with EndTxn v5+
	// (transaction version 2), which bumps the producer epoch, so each
	// transaction's sequences start at 0. Learnt with mode.
	epochPerTxn bool
	stale       bool // an append failed: re-read sequences before the next one
}

// New returns a Mapper for one destination partition. It does no I/O.
func New(cfg Config) *Mapper {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Jitter == nil {
		cfg.Jitter = rand.Float64
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	log = log.With(attrMirror, cfg.Mirror, attrTopic, cfg.Topic, attrPartition, cfg.Partition)
	return &Mapper{cfg: cfg, log: log, producers: make(map[int64]*producer), timeout: cfg.TxnTimeout}
}

// TxnID is the destination transactional id that mirrors the transactions
// of source producer sourcePID on one partition. It is deterministic so a
// restarted engine finds its own open transactions.
func TxnID(mirror, topic string, partition int32, sourcePID int64) string {
	return fmt.Sprintf("kmirror/%s/%s/%d/txn/%d", mirror, topic, partition, sourcePID)
}

// Writer returns the writer identity for one transactional data batch h of
// the source, and the transactional id the Produce request must carry.
//
// It gets or creates the producer mapped to h.ProducerID and opens its
// destination transaction on the partition if none is open. The returned
// writer carries the producer's next sequence, and Writer advances it past
// the batch at once: sequences are reserved when the batch is issued, so
// several batches may be in flight, in issue order, on one order-preserving
// connection. Call Writer exactly once per issued batch. If an append fails,
// call ProduceFailed with the error: the Mapper then re-reads its sequences
// from the destination before the next Writer or End, which the caller makes
// only after every in-flight batch has been answered and the destination
// position is known again (the runner's realignment).
func (m *Mapper) Writer(ctx context.Context, h batch.Header) (batch.Writer, string, error) {
	if !h.IsTransactional() || h.IsControl() {
		return batch.Writer{}, "", fmt.Errorf("%s/%d writer for batch at %d: %w", m.cfg.Topic, m.cfg.Partition, h.BaseOffset, ErrNotTransactional)
	}
	if err := m.resyncIfStale(ctx); err != nil {
		return batch.Writer{}, "", err
	}
	p, err := m.producerFor(ctx, h.ProducerID)
	if err != nil {
		return batch.Writer{}, "", err
	}
	if p.aborted != nil {
		return batch.Writer{}, "", p.aborted
	}
	if !p.Open {
		if err := m.begin(ctx, p); err != nil {
			return batch.Writer{}, "", err
		}
	}
	if p.FirstOffset < 0 {
		p.FirstOffset = h.BaseOffset
	}
	w := batch.Writer{ProducerID: p.PID, ProducerEpoch: p.Epoch, BaseSequence: p.NextSeq}
	p.NextSeq = nextSequence(p.NextSeq, h.LastOffsetDelta+1)
	return w, p.TxnID, nil
}

// begin opens p's transaction on the partition.
func (m *Mapper) begin(ctx context.Context, p *producer) error {
	mode, err := m.joinMode(ctx)
	if err != nil {
		return err
	}
	if mode == addExplicit {
		if err := m.addPartition(ctx, p); err != nil {
			return m.classify(ctx, p, err)
		}
	}
	// In implicit mode the first Produce opens it at the coordinator. Until
	// one lands nothing is open there, so if that first append fails, End
	// and AbortAll take the missing transaction for a coordinator abort:
	// the implicit mode is only a fallback for a broker without the client
	// form of AddPartitionsToTxn, which no Kafka release lacks so far.
	p.Open = true
	p.FirstOffset = -1
	return nil
}

// producerFor returns the producer mapped to sourcePID, creating it if
// needed. Before creating one it asks the coordinator whether its
// transactional id already has a transaction open (a previous run whose state
// was not persisted): that transaction is adopted, never re-initialised,
// because a re-init would abort it and write a marker the source lacks.
func (m *Mapper) producerFor(ctx context.Context, sourcePID int64) (*producer, error) {
	now := m.cfg.Now()
	if p := m.producers[sourcePID]; p != nil {
		p.lastUsed = now
		return p, nil
	}
	txnID := TxnID(m.cfg.Mirror, m.cfg.Topic, m.cfg.Partition, sourcePID)
	d, err := m.settle(ctx, txnID)
	if err != nil {
		return nil, err
	}
	p := &producer{Producer: Producer{SourcePID: sourcePID, TxnID: txnID, FirstOffset: -1}, lastUsed: now}
	if d.state == stateOngoing {
		p.PID, p.Epoch, p.Open = d.pid, d.epoch, d.ours
		if err := m.resyncOne(ctx, p, nil); err != nil {
			return nil, err
		}
		m.log.Info("adopted an open mirrored transaction", attrTxnID, txnID, attrProducerID, p.PID, attrProducerEpoch, p.Epoch, attrNextSequence, p.NextSeq)
	} else {
		if p.PID, p.Epoch, err = m.initProducer(ctx, txnID); err != nil {
			return nil, err
		}
	}
	m.producers[sourcePID] = p
	return p, nil
}

// Open returns the state of every mapped producer with an open transaction,
// ordered by source producer id: what must be persisted so that a restarted
// engine continues those transactions (Restore). Producers without an open
// transaction need not be persisted; they are recreated on demand.
func (m *Mapper) Open() []Producer {
	var out []Producer
	for _, p := range m.producers {
		if p.Open {
			out = append(out, p.Producer)
		}
	}
	slices.SortFunc(out, func(a, b Producer) int { return cmp.Compare(a.SourcePID, b.SourcePID) })
	return out
}

// Deadline returns when the destination's coordinator will abort the first
// of the open mirrored transactions on its own, unless they end before: a
// transaction's timeout runs from its start, whatever is appended to it
// since. n is the number of open transactions; the time is zero when none is
// open or no coordinator says.
func (m *Mapper) Deadline(ctx context.Context) (first time.Time, n int, err error) {
	var errs []error
	for _, p := range m.producers {
		if !p.Open {
			continue
		}
		n++
		d, err := m.describeTxn(ctx, p.TxnID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if d.ongoingFor(p) && !d.deadline.IsZero() && (first.IsZero() || d.deadline.Before(first)) {
			first = d.deadline
		}
	}
	return first, n, errors.Join(errs...)
}

// ReleaseIdle forgets mapped producers with no open transaction that were
// last used more than idle before now, and returns how many it forgot. A
// source producer that comes back gets its transactional id initialised
// again, which is safe while nothing is open.
func (m *Mapper) ReleaseIdle(now time.Time, idle time.Duration) int {
	n := 0
	for id, p := range m.producers {
		if !p.Open && p.aborted == nil && now.Sub(p.lastUsed) > idle {
			delete(m.producers, id)
			n++
		}
	}
	return n
}

// nextSequence advances a sequence by count, wrapping after MaxInt32 as
// Kafka does.
func nextSequence(seq, count int32) int32 {
	const wrap = int64(1) << 31
	return int32((int64(seq) + int64(count)) % wrap)
}
