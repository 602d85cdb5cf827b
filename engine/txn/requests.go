package txn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kmirror/kmirror/internal/backoff"
)

// Request keys whose advertised versions decide how partitions join a
// transaction.
const (
	keyProduce            = 0
	keyAddPartitionsToTxn = 24
	// addPartitionsClientMax is the last AddPartitionsToTxn version of the
	// client form; v4+ is broker to coordinator and needs CLUSTER_ACTION.
	addPartitionsClientMax = 3
	// produceImplicitAdd is the first Produce version with which a broker
	// adds the partition to the transaction itself (KIP-890 part 2).
	produceImplicitAdd = 12
)

// maxAttempts bounds the retries of one coordinator request. With the
// backoff below they span about ten seconds, long enough for a coordinator
// to move or finish writing the previous transaction's markers.
const maxAttempts = 15

var retryPolicy = backoff.Policy{Initial: 20 * time.Millisecond, Max: time.Second}

// coordState is a transactional id's state at its coordinator, as
// DescribeTransactions names it.
type coordState int

const (
	stateNotFound coordState = iota // the coordinator does not know the id
	stateEmpty
	stateOngoing
	statePrepareCommit
	statePrepareAbort
	stateCompleteCommit
	stateCompleteAbort
	stateOther // Dead, PrepareEpochFence, or a name this build does not know
)

func (s coordState) String() string {
	switch s {
	case stateNotFound:
		return "NotFound"
	case stateEmpty:
		return "Empty"
	case stateOngoing:
		return "Ongoing"
	case statePrepareCommit:
		return "PrepareCommit"
	case statePrepareAbort:
		return "PrepareAbort"
	case stateCompleteCommit:
		return "CompleteCommit"
	case stateCompleteAbort:
		return "CompleteAbort"
	case stateOther:
		return "Other"
	}
	return "coordState(" + strconv.Itoa(int(s)) + ")"
}

func parseCoordState(name string) coordState {
	for _, s := range []coordState{stateEmpty, stateOngoing, statePrepareCommit, statePrepareAbort, stateCompleteCommit, stateCompleteAbort} {
		if s.String() == name {
			return s
		}
	}
	return stateOther
}

// pending reports a transaction whose markers the coordinator is writing.
func (s coordState) pending() bool { return s == statePrepareCommit || s == statePrepareAbort }

// txnDesc is what the coordinator says about one transactional id.
type txnDesc struct {
	state coordState
	pid   int64
	epoch int16
	ours  bool // the transaction includes this partition
	// deadline is when the coordinator aborts the open transaction on its
	// own: its start plus its timeout, by the coordinator's clock; zero
	// when nothing is open or the coordinator does not say.
	deadline time.Time
}

// ongoingFor reports that the coordinator still holds p's transaction open.
func (d txnDesc) ongoingFor(p *producer) bool {
	return d.state == stateOngoing && d.pid == p.PID && d.epoch == p.Epoch
}

// retriable reports errors after which the same coordinator request may
// succeed. CONCURRENT_TRANSACTIONS is not flagged retriable by kerr but is
// exactly that: the coordinator is still completing the previous transaction.
func retriable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kgo.ErrClientClosed) {
		return false
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable || errors.Is(err, kerr.ConcurrentTransactions)
	}
	return true // a connection or client error, not an answer from Kafka
}

// retry runs op until it succeeds, fails with a non-retriable error, runs
// out of attempts, or ctx ends.
func (m *Mapper) retry(ctx context.Context, op func() error) error {
	b := backoff.Backoff{Policy: retryPolicy}
	for {
		err := op()
		if !retriable(err) || b.Attempt() >= maxAttempts {
			return err
		}
		if werr := backoff.Sleep(ctx, b.Next(m.cfg.Jitter)); werr != nil {
			return fmt.Errorf("%w (last error: %w)", werr, err)
		}
	}
}

func errFor(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err != nil && msg != nil && *msg != "" {
		return fmt.Errorf("%w: %s", err, *msg)
	}
	return err
}

// describeTxn asks the coordinator about txnID.
func (m *Mapper) describeTxn(ctx context.Context, txnID string) (txnDesc, error) {
	var d txnDesc
	err := m.retry(ctx, func() error {
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{txnID}
		resp, err := req.RequestWith(ctx, m.cfg.Client)
		if err != nil {
			return err
		}
		for _, st := range resp.TransactionStates {
			if st.TransactionalID != txnID {
				continue
			}
			if err := kerr.ErrorForCode(st.ErrorCode); err != nil {
				if errors.Is(err, kerr.TransactionalIDNotFound) {
					d = txnDesc{state: stateNotFound, pid: -1, epoch: -1}
					return nil
				}
				return err
			}
			d = txnDesc{state: parseCoordState(st.State), pid: st.ProducerID, epoch: st.ProducerEpoch}
			if st.StartTimestamp > 0 && st.TimeoutMillis > 0 {
				d.deadline = time.UnixMilli(st.StartTimestamp).Add(time.Duration(st.TimeoutMillis) * time.Millisecond)
			}
			for _, t := range st.Topics {
				for _, p := range t.Partitions {
					if t.Topic == m.cfg.Topic && p == m.cfg.Partition {
						d.ours = true
					}
				}
			}
			return nil
		}
		return fmt.Errorf("transaction %s missing from the response", txnID)
	})
	if err != nil {
		return txnDesc{}, fmt.Errorf("describe transaction %s: %w", txnID, err)
	}
	return d, nil
}

// settle waits while the coordinator writes txnID's markers, so that what
// follows sees a finished transaction.
func (m *Mapper) settle(ctx context.Context, txnID string) (txnDesc, error) {
	b := backoff.Backoff{Policy: pollPolicy}
	for {
		d, err := m.describeTxn(ctx, txnID)
		if err != nil || !d.state.pending() {
			return d, err
		}
		if err := backoff.Sleep(ctx, b.Next(m.cfg.Jitter)); err != nil {
			return d, fmt.Errorf("transaction %s still %s: %w", txnID, d.state, err)
		}
	}
}

// initProducer obtains a producer id and a fresh epoch for txnID. Only call
// it once the coordinator has no open transaction for txnID: a re-init aborts
// an open transaction and writes a marker the source does not have.
func (m *Mapper) initProducer(ctx context.Context, txnID string) (int64, int16, error) {
	timeout, err := m.txnTimeout(ctx)
	if err != nil {
		return 0, 0, err
	}
	var pid int64
	var epoch int16
	err = m.retry(ctx, func() error {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &txnID
		req.TransactionTimeoutMillis = int32(min(timeout.Milliseconds(), math.MaxInt32))
		req.ProducerID = -1
		req.ProducerEpoch = -1
		resp, err := req.RequestWith(ctx, m.cfg.Client)
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		pid, epoch = resp.ProducerID, resp.ProducerEpoch
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("init mirrored producer %s: %w", txnID, err)
	}
	return pid, epoch, nil
}

// addPartition puts this partition into p's transaction, which opens it.
func (m *Mapper) addPartition(ctx context.Context, p *producer) error {
	err := m.retry(ctx, func() error {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID = p.TxnID
		req.ProducerID = p.PID
		req.ProducerEpoch = p.Epoch
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic = m.cfg.Topic
		rt.Partitions = []int32{m.cfg.Partition}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, m.cfg.Client)
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		found := false
		for _, t := range resp.Topics {
			for _, rp := range t.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return err
				}
				found = found || (t.Topic == m.cfg.Topic && rp.Partition == m.cfg.Partition)
			}
		}
		if !found {
			return fmt.Errorf("partition missing from the response")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("add %s/%d to transaction %s: %w", m.cfg.Topic, m.cfg.Partition, p.TxnID, err)
	}
	return nil
}

// endTxn commits or aborts p's transaction. With EndTxn v5 (transaction
// version 2) the coordinator bumps the epoch, or rotates the producer id when
// the epoch is exhausted, and returns the new pair; older versions keep them.
func (m *Mapper) endTxn(ctx context.Context, p *producer, commit bool) (pid int64, epoch int16, err error) {
	pid, epoch = p.PID, p.Epoch
	err = m.retry(ctx, func() error {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID = p.TxnID
		req.ProducerID = p.PID
		req.ProducerEpoch = p.Epoch
		req.Commit = commit
		resp, err := req.RequestWith(ctx, m.cfg.Client)
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		if resp.Version >= 5 && resp.ProducerID >= 0 && resp.ProducerEpoch >= 0 {
			pid, epoch = resp.ProducerID, resp.ProducerEpoch
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("end transaction %s (commit %v): %w", p.TxnID, commit, err)
	}
	return pid, epoch, nil
}

// logEnd returns the destination partition's log end (its high watermark,
// which is what a client's appends are checked against).
func (m *Mapper) logEnd(ctx context.Context) (int64, error) {
	var end int64
	err := m.retry(ctx, func() error {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = m.cfg.Topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = m.cfg.Partition
		rp.Timestamp = -1 // latest
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, m.cfg.Client)
		if err != nil {
			return err
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if t.Topic == m.cfg.Topic && p.Partition == m.cfg.Partition {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
						return err
					}
					end = p.Offset
					return nil
				}
			}
		}
		return fmt.Errorf("partition missing from the response")
	})
	if err != nil {
		return 0, fmt.Errorf("list end offset %s/%d: %w", m.cfg.Topic, m.cfg.Partition, err)
	}
	return end, nil
}

// activeProducer is the partition leader's state of one producer.
type activeProducer struct {
	epoch        int16
	lastSequence int32
	txnStart     int64 // first offset of its open transaction, -1 when none
}

// describeProducers returns the producers the destination partition leader
// holds state for, by producer id. Kafka lists every producer with state;
// kfake lists only those inside an open transaction.
func (m *Mapper) describeProducers(ctx context.Context) (map[int64]activeProducer, error) {
	out := make(map[int64]activeProducer)
	err := m.retry(ctx, func() error {
		req := kmsg.NewPtrDescribeProducersRequest()
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic = m.cfg.Topic
		rt.Partitions = []int32{m.cfg.Partition}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, m.cfg.Client)
		if err != nil {
			return err
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if t.Topic != m.cfg.Topic || p.Partition != m.cfg.Partition {
					continue
				}
				if err := errFor(p.ErrorCode, p.ErrorMessage); err != nil {
					return err
				}
				clear(out)
				for _, ap := range p.ActiveProducers {
					out[ap.ProducerID] = activeProducer{epoch: int16(ap.ProducerEpoch), lastSequence: ap.LastSequence, txnStart: ap.CurrentTxnStartOffset}
				}
				return nil
			}
		}
		return fmt.Errorf("partition missing from the response")
	})
	if err != nil {
		return nil, fmt.Errorf("describe producers %s/%d: %w", m.cfg.Topic, m.cfg.Partition, err)
	}
	return out, nil
}

// txnTimeout is the timeout of every mirrored transaction: the configured
// one, else the destination's transaction.max.timeout.ms (a mirrored
// transaction lives as long as the source's plus the mirror's lag, so it gets
// the longest the destination allows), else 60s.
func (m *Mapper) txnTimeout(ctx context.Context) (time.Duration, error) {
	if m.timeout > 0 {
		return m.timeout, nil
	}
	d, err := MaxTimeout(ctx, m.cfg.Client)
	switch {
	case err == nil:
		m.timeout = d
	case ctx.Err() != nil:
		return 0, ctx.Err()
	default:
		m.timeout = DefaultTimeout
		m.log.Warn("cannot read the destination's transaction.max.timeout.ms; mirrored transactions use the default timeout",
			attrTimeout, DefaultTimeout, attrErr, err)
	}
	return m.timeout, nil
}

// DefaultTimeout is the timeout of mirrored transactions when the
// destination's transaction.max.timeout.ms cannot be read.
const DefaultTimeout = 60 * time.Second

// MaxTimeout reads transaction.max.timeout.ms from one broker of the
// cluster cl reaches: the longest a transaction may stay open there before
// its coordinator aborts it.
func MaxTimeout(ctx context.Context, cl *kgo.Client) (time.Duration, error) {
	d, err := brokerTxnMaxTimeout(ctx, cl)
	if err != nil {
		return 0, fmt.Errorf("destination transaction.max.timeout.ms: %w", err)
	}
	return d, nil
}

// brokerTxnMaxTimeout reads transaction.max.timeout.ms from one broker.
func brokerTxnMaxTimeout(ctx context.Context, cl *kgo.Client) (time.Duration, error) {
	meta := kmsg.NewPtrMetadataRequest()
	meta.Topics = []kmsg.MetadataRequestTopic{}
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	if len(mresp.Brokers) == 0 {
		return 0, errors.New("no brokers in metadata")
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType = kmsg.ConfigResourceTypeBroker
	rr.ResourceName = strconv.Itoa(int(mresp.Brokers[0].NodeID))
	rr.ConfigNames = []string{"transaction.max.timeout.ms"}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	for _, r := range resp.Resources {
		if err := errFor(r.ErrorCode, r.ErrorMessage); err != nil {
			return 0, err
		}
		for _, c := range r.Configs {
			if c.Name != "transaction.max.timeout.ms" || c.Value == nil {
				continue
			}
			ms, err := strconv.ParseInt(*c.Value, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("transaction.max.timeout.ms %q: %w", *c.Value, err)
			}
			if ms <= 0 {
				return 0, fmt.Errorf("transaction.max.timeout.ms %d is not positive", ms)
			}
			return time.Duration(ms) * time.Millisecond, nil
		}
	}
	return 0, errors.New("transaction.max.timeout.ms not returned")
}

// addMode is how this partition joins a mirrored transaction.
type addMode int

const (
	addUnknown  addMode = iota // not asked yet
	addExplicit                // AddPartitionsToTxn, client form
	addImplicit                // the broker adds on the first Produce v12+
)

func (a addMode) String() string {
	switch a {
	case addUnknown:
		return "unknown"
	case addExplicit:
		return "explicit"
	case addImplicit:
		return "implicit"
	}
	return "addMode(" + strconv.Itoa(int(a)) + ")"
}

// joinMode asks the destination, once, how a partition joins a transaction.
// The client form of AddPartitionsToTxn (v0-3) is preferred whenever the
// broker takes it: it works with both transaction versions, and it is the
// only way to open a transaction with no data, which a source marker with no
// mirrored data needs. Only a broker that dropped the client form is left to
// add the partition implicitly on Produce v12+.
func (m *Mapper) joinMode(ctx context.Context) (addMode, error) {
	if m.mode != addUnknown {
		return m.mode, nil
	}
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName = "kmirror"
	req.ClientSoftwareVersion = "1"
	resp, err := req.RequestWith(ctx, m.cfg.Client)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		return addUnknown, fmt.Errorf("destination api versions: %w", err)
	}
	var addMin, produceMax int16 = -1, -1
	for _, k := range resp.ApiKeys {
		switch k.ApiKey {
		case keyAddPartitionsToTxn:
			addMin = k.MinVersion
		case keyProduce:
			produceMax = k.MaxVersion
		case int16(kmsg.EndTxn):
			m.epochPerTxn = k.MaxVersion >= 5
		}
	}
	switch {
	case addMin >= 0 && addMin <= addPartitionsClientMax:
		m.mode = addExplicit
	case produceMax >= produceImplicitAdd:
		m.mode = addImplicit
	default:
		return addUnknown, fmt.Errorf("%w: AddPartitionsToTxn from v%d, Produce up to v%d", ErrUnsupported, addMin, produceMax)
	}
	return m.mode, nil
}
