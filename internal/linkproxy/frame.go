package linkproxy

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The Kafka framing, shared by the proxies here and by the test harnesses
// that stand between a cluster and its clients: every request and response
// is a 4-byte big-endian size and that many bytes; a request's header is
// its key, version, correlation id and client id (and, in flexible
// versions, tagged fields); a response's header is the correlation id (and
// tagged fields when the request's version is flexible, ApiVersions
// excepted).

// Header is a request's header.
type Header struct {
	Key     int16
	Version int16
	Corr    int32
}

var errShortHeader = errors.New("request header truncated")

// NextFrame splits the first size-prefixed frame off b.
func NextFrame(b []byte) (frame, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, b, false
	}
	n := int(binary.BigEndian.Uint32(b))
	if len(b) < 4+n {
		return nil, b, false
	}
	return b[:4+n], b[4+n:], true
}

// ParseRequestHeader reads the header of a request frame (its size
// included) and returns the body after it. frame may be a prefix of the
// frame: the body is then what of it follows the header.
func ParseRequestHeader(frame []byte) (Header, []byte, error) {
	if len(frame) < 4 {
		return Header{}, nil, errShortHeader
	}
	r := kbin.Reader{Src: frame[4:]}
	h := Header{Key: r.Int16(), Version: r.Int16(), Corr: r.Int32()}
	r.NullableString() // client id
	if flexibleRequest(h.Key, h.Version) {
		kmsg.SkipTags(&r)
	}
	if r.Complete() != nil {
		return Header{}, nil, errShortHeader
	}
	return h, r.Src, nil
}

// flexibleRequest reports whether version of the request key uses the
// flexible (tagged) header; false for a key kmsg does not know.
func flexibleRequest(key, version int16) bool {
	req := kmsg.RequestForKey(key)
	if req == nil {
		return false
	}
	req.SetVersion(version)
	return req.IsFlexible()
}

// DecodeRequest decodes a whole request frame.
func DecodeRequest(frame []byte) (Header, kmsg.Request, error) {
	h, body, err := ParseRequestHeader(frame)
	if err != nil {
		return h, nil, err
	}
	req := kmsg.RequestForKey(h.Key)
	if req == nil {
		return h, nil, fmt.Errorf("request key %d unknown", h.Key)
	}
	req.SetVersion(h.Version)
	if err := req.ReadFrom(body); err != nil {
		return h, nil, fmt.Errorf("decode %s v%d request: %w", kmsg.NameForKey(h.Key), h.Version, err)
	}
	return h, req, nil
}

// DecodeResponse decodes a whole response frame answering a request of
// key and version.
func DecodeResponse(frame []byte, key, version int16) (kmsg.Response, error) {
	resp := kmsg.ResponseForKey(key)
	if resp == nil || len(frame) < 8 {
		return nil, fmt.Errorf("response to request key %d: unknown key or truncated frame", key)
	}
	resp.SetVersion(version)
	r := kbin.Reader{Src: frame[8:]}
	if resp.IsFlexible() && key != int16(kmsg.ApiVersions) {
		kmsg.SkipTags(&r)
	}
	if err := r.Complete(); err != nil {
		return nil, fmt.Errorf("decode %s v%d response header: %w", kmsg.NameForKey(key), version, err)
	}
	if err := resp.ReadFrom(r.Src); err != nil {
		return nil, fmt.Errorf("decode %s v%d response: %w", kmsg.NameForKey(key), version, err)
	}
	return resp, nil
}

// AppendResponse appends resp as a response frame with correlation id
// corr, with no tagged fields in its header.
func AppendResponse(dst []byte, corr int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		dst = append(dst, 0) // no tagged fields
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// produceAcks reads the acks of a Produce request from the body after its
// header (a prefix of it suffices); ok is false when it is too short.
func produceAcks(version int16, body []byte) (acks int16, ok bool) {
	r := kbin.Reader{Src: body}
	if version >= 3 {
		if flexibleRequest(int16(kmsg.Produce), version) {
			r.CompactNullableString()
		} else {
			r.NullableString()
		}
	}
	acks = r.Int16()
	return acks, r.Complete() == nil
}
