package wire

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrMalformedProduce is ProduceAnswer's error for an answer that is not
// about exactly the one partition asked.
var ErrMalformedProduce = errors.New("malformed produce response")

// ProduceRequest asks to append batch to one partition, acknowledged by
// every in-sync replica (a Conn refuses acks=0), within timeout on the
// broker; txnID is the transactional id of a transactional batch, nil
// otherwise.
func ProduceRequest(topic string, topicID [16]byte, partition int32, batch []byte, timeout time.Duration, txnID *string) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = int32(timeout / time.Millisecond)
	req.TransactionID = txnID
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// ProduceAnswer reads the answer to a ProduceRequest: the base offset it
// names and the partition's error code as a kerr error, with the broker's
// message. The offset is returned with an error too: after
// DUPLICATE_SEQUENCE_NUMBER it may say where the batch is.
func ProduceAnswer(resp kmsg.Response) (int64, error) {
	pr, ok := resp.(*kmsg.ProduceResponse)
	if !ok || len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != 1 {
		return -1, ErrMalformedProduce
	}
	p := pr.Topics[0].Partitions[0]
	err := kerr.ErrorForCode(p.ErrorCode)
	if err != nil && p.ErrorMessage != nil {
		err = fmt.Errorf("%w: %s", err, *p.ErrorMessage)
	}
	return p.BaseOffset, err
}
