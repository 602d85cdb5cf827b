package wire

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	testTopic   = "t"
	testTimeout = 30 * time.Second
)

// newCluster starts a three-broker kfake cluster with one single-partition
// topic and a cluster id unique to the test.
func newCluster(tb testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	tb.Helper()
	id := "kmirror-wire-" + strings.NewReplacer("/", "-", " ", "-").Replace(tb.Name())
	base := []kfake.Opt{kfake.NumBrokers(3), kfake.ClusterID(id), kfake.SeedTopics(1, testTopic)}
	c, err := kfake.NewCluster(append(base, opts...)...)
	if err != nil {
		tb.Fatalf("start kfake: %v", err)
	}
	tb.Cleanup(c.Close)
	return c
}

func testCtx(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(tb.Context(), testTimeout)
	tb.Cleanup(cancel)
	return ctx
}

func dialTest(tb testing.TB, ctx context.Context, addr string, opts Options) *Conn {
	tb.Helper()
	if opts.ClientID == "" {
		opts.ClientID = "kmirror-wire-test"
	}
	c, err := Dial(ctx, addr, opts)
	if err != nil {
		tb.Fatalf("dial %s: %v", addr, err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// partitionInfo is what a test needs to produce to one partition.
type partitionInfo struct {
	topicID    [16]byte
	leader     int32
	leaderAddr string
	brokers    map[int32]string
}

// testTopicInfo asks the cluster's first broker where testTopic's partition
// 0 is led.
func testTopicInfo(tb testing.TB, ctx context.Context, cluster *kfake.Cluster) partitionInfo {
	tb.Helper()
	c0 := dialTest(tb, ctx, cluster.ListenAddrs()[0], Options{})
	info, _, err := metadata(ctx, c0, testTopic, 0)
	if err != nil {
		tb.Fatal(err)
	}
	return info
}

func metadata(ctx context.Context, c *Conn, topic string, partition int32) (partitionInfo, *kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	raw, err := c.Request(ctx, req)
	if err != nil {
		return partitionInfo{}, nil, err
	}
	resp := raw.(*kmsg.MetadataResponse)
	info := partitionInfo{leader: -1, brokers: make(map[int32]string)}
	for _, b := range resp.Brokers {
		info.brokers[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return info, resp, fmt.Errorf("metadata %s: %w", topic, err)
		}
		info.topicID = t.TopicID
		for _, p := range t.Partitions {
			if p.Partition == partition {
				info.leader = p.Leader
			}
		}
	}
	if info.leader < 0 {
		return info, resp, fmt.Errorf("metadata %s/%d: no leader", topic, partition)
	}
	info.leaderAddr = info.brokers[info.leader]
	return info, resp, nil
}

// initTxnProducer asks the transaction coordinator of txnID for a producer
// id and epoch, using only wire connections.
func initTxnProducer(ctx context.Context, boot *Conn, brokers map[int32]string, txnID string) (int64, int16, error) {
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType = 1 // transaction
	fc.CoordinatorKey = txnID
	fc.CoordinatorKeys = []string{txnID} // v4+; kmsg encodes whichever field the version has
	raw, err := boot.Request(ctx, fc)
	if err != nil {
		return 0, 0, err
	}
	fcResp := raw.(*kmsg.FindCoordinatorResponse)
	node, code := fcResp.NodeID, fcResp.ErrorCode
	if fcResp.Version >= 4 {
		if len(fcResp.Coordinators) != 1 {
			return 0, 0, fmt.Errorf("find coordinator: %d coordinators", len(fcResp.Coordinators))
		}
		node, code = fcResp.Coordinators[0].NodeID, fcResp.Coordinators[0].ErrorCode
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return 0, 0, fmt.Errorf("find coordinator: %w", err)
	}
	coord, err := Dial(ctx, brokers[node], Options{ClientID: "kmirror-wire-test"})
	if err != nil {
		return 0, 0, err
	}
	defer coord.Close()

	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID = kmsg.StringPtr(txnID)
	ip.TransactionTimeoutMillis = 60_000
	raw, err = coord.Request(ctx, ip)
	if err != nil {
		return 0, 0, err
	}
	ipResp := raw.(*kmsg.InitProducerIDResponse)
	if err := kerr.ErrorForCode(ipResp.ErrorCode); err != nil {
		return 0, 0, fmt.Errorf("init producer id: %w", err)
	}
	return ipResp.ProducerID, ipResp.ProducerEpoch, nil
}

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// buildBatch encodes an uncompressed, non-transactional idempotent v2 batch
// with baseOffset 0, as a producer sends it.
func buildBatch(pid int64, epoch int16, seq int32, ts int64, values ...[]byte) []byte {
	var records []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: v}
		body := r.AppendTo(nil)[1:] // drop the placeholder zero length
		records = binary.AppendVarint(records, int64(len(body)))
		records = append(records, body...)
	}
	b := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		LastOffsetDelta:      int32(len(values) - 1),
		FirstTimestamp:       ts,
		MaxTimestamp:         ts,
		ProducerID:           pid,
		ProducerEpoch:        epoch,
		FirstSequence:        seq,
		NumRecords:           int32(len(values)),
		Records:              records,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:12], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:21], crc32.Checksum(raw[21:], crc32c))
	return raw
}
