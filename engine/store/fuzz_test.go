package store

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func seed(f *testing.F, fixture string, extra ...string) {
	b, err := os.ReadFile(filepath.Join("testdata", "v1", fixture))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	for _, s := range extra {
		f.Add([]byte(s))
	}
}

// fuzzRoundTrip checks that decoding never panics, fails only with the
// package's errors, and that whatever decodes survives encode and decode
// unchanged.
func fuzzRoundTrip[T any](f *testing.F, dec func([]byte) (T, error), enc func(T) ([]byte, error)) {
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := dec(b)
		if err != nil {
			var ve *VersionError
			if !errors.Is(err, ErrMalformed) && !errors.As(err, &ve) {
				t.Fatalf("decode error %v is neither ErrMalformed nor *VersionError", err)
			}
			return
		}
		out, err := enc(v)
		if err != nil {
			t.Fatalf("decoded value does not encode: %v\n%+v", err, v)
		}
		back, err := dec(out)
		if err != nil {
			t.Fatalf("re-encoded value does not decode: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(v, back) {
			t.Fatalf("round trip changed the value:\n%+v\n%+v", v, back)
		}
	})
}

func FuzzDecodeMirror(f *testing.F) {
	seed(f, "mirror.json", `{"v":1,"name":"m","config":{},"createdAt":"9999-12-31T23:59:59-01:00"}`, `{"v":2}`)
	fuzzRoundTrip(f, DecodeMirror, EncodeMirror)
}

func FuzzDecodeTopic(f *testing.F) {
	seed(f, "topic.json", `{"v":1,"mirror":"m","topic":"t","desired":"stop"}`, `{"v":1,"desired":""}`)
	fuzzRoundTrip(f, DecodeTopic, EncodeTopic)
}

func FuzzDecodePartition(f *testing.F) {
	seed(f, "partition.json", `{"v":1,"mirror":"m","topic":"t","cause":"from_the_future","lineage":[]}`,
		`{"v":1,"mirror":"m","topic":"t","state":"ULE_RECOVERY","lastOffset":-2}`)
	fuzzRoundTrip(f, DecodePartition, EncodePartition)
}

func FuzzDecodeInstance(f *testing.F) {
	seed(f, "instance.json", `{"v":1,"instance":"i","mirrors":[{"name":"m","source":{}}]}`,
		`{"v":1,"instance":"i","shards":[2,1],"at":"0000-01-01T00:00:00+01:00"}`)
	fuzzRoundTrip(f, DecodeInstance, EncodeInstance)
}

func FuzzDecodeRebuild(f *testing.F) {
	seed(f, "rebuild.json", `{"v":1,"mirror":"m","topic":"t","step":"deleted","quarantine":"q","partitions":1}`,
		`{"v":1,"mirror":"m","topic":"t","step":"quarantined","quarantine":"q","partitions":1,"ranges":[{"partition":0,"from":3,"to":5,"copied":2}]}`,
		`{"v":1,"mirror":"m","topic":"t","step":"later","quarantine":"q","partitions":1}`)
	fuzzRoundTrip(f, DecodeRebuild, EncodeRebuild)
}

func FuzzDecodeHeldACLs(f *testing.F) {
	seed(f, "acls.json", `{"v":1,"mirror":"m","topic":"t","grants":[{"principal":"User:b","host":"*"},{"principal":"User:a","host":"*"}]}`,
		`{"v":1,"mirror":"m","topic":"t","grants":[{"principal":"nobody","host":"*"}]}`, `{"v":1,"mirror":"m","topic":"t","grants":[]}`)
	fuzzRoundTrip(f, DecodeHeldACLs, EncodeHeldACLs)
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"acls/m/t", "acls/m", "mirror/a-to-b", "instance/host-1-77", "instance/", "instance/a/b", "rebuild/m/t", "topic/m/t.x_y", "partition/m/t/12", "partition/m/t/012", "topic//", "a/b/c/d/e"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ParseKey(b)
		if err != nil {
			if !errors.Is(err, ErrBadKey) {
				t.Fatalf("error %v is not ErrBadKey", err)
			}
			return
		}
		if string(k.Bytes()) != string(b) {
			t.Fatalf("key %q formats back as %q", b, k.Bytes())
		}
		if s := k.Shard(); s < 0 || s >= Partitions {
			t.Fatalf("shard %d out of range", s)
		}
	})
}
