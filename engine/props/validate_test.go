package props

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestValidateMirrorConfigOK(t *testing.T) {
	p := parse(t, `bootstrap.servers=a1:9092, [::1]:9093
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.username=kmirror
sasl.password=${env:KMIRROR_PW}
ssl.endpoint.identification.algorithm=
mirror.num.replica.fetchers=4 
mirror.gap.policy=fill
mirror.failed.retry.initial.backoff.ms=200
mirror.failed.retry.max.backoff.ms=60000
mirror.failed.retry.max.attempts=10
topics.exclude=__.*, .*\.internal, x{1,3}
mirror.unclean.leader.election.enable=true
mirror.max.inflight=5
`)
	warnings, err := ValidateMirrorConfig(p)
	if err != nil || len(warnings) != 0 {
		t.Fatalf("valid config: warnings %q, err %v", warnings, err)
	}
}

func TestValidateMirrorConfigErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"missing bootstrap", "client.id=x", "bootstrap.servers: required"},
		{"empty bootstrap", "bootstrap.servers=", "line 1: bootstrap.servers: empty"},
		{"bootstrap without port", "bootstrap.servers=a1", `line 1: bootstrap.servers: "a1" is not host:port`},
		{"bootstrap bad port", "bootstrap.servers=a1:99999", `"a1:99999" has no valid port`},
		{"protocol", "bootstrap.servers=a:1\nsecurity.protocol=TLS",
			`line 2: security.protocol: "TLS" is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL`},
		{"mechanism", "bootstrap.servers=a:1\nsecurity.protocol=SASL_SSL\nsasl.jaas.config=x\nsasl.mechanism=GSSAPI",
			`line 4: sasl.mechanism: "GSSAPI" is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512`},
		{"gap policy", "bootstrap.servers=a:1\nmirror.gap.policy=skip", `line 2: mirror.gap.policy: "skip" is not one of fail, fill`},
		{"boolean", "bootstrap.servers=a:1\nmirror.unclean.leader.election.enable=yes", `"yes" is not one of true, false`},
		{"zero fetchers", "bootstrap.servers=a:1\nmirror.num.fetchers=0", `line 2: mirror.num.fetchers: "0" is not a positive integer`},
		{"negative backoff", "bootstrap.servers=a:1\nmirror.failed.retry.initial.backoff.ms=-5", `"-5" is not a positive integer`},
		{"not a number", "bootstrap.servers=a:1\nmirror.metadata.refresh.interval.ms=30s", `"30s" is not a positive integer`},
		{"inflight range", "bootstrap.servers=a:1\nmirror.max.inflight=6", `line 2: mirror.max.inflight: "6" is not an integer from 1 to 5`},
		{"bad pattern", "bootstrap.servers=a:1\nmirror.groups.include=ok,(", `line 2: mirror.groups.include: pattern "(": error parsing regexp`},
		{"initial above max", "bootstrap.servers=a:1\nmirror.failed.retry.initial.backoff.ms=5000\nmirror.failed.retry.max.backoff.ms=1000",
			"line 2: mirror.failed.retry.initial.backoff.ms: 5000 is above mirror.failed.retry.max.backoff.ms (1000)"},
		{"sasl without credentials", "bootstrap.servers=a:1\nsecurity.protocol=SASL_PLAINTEXT\nsasl.username=u",
			"line 2: security.protocol: SASL_PLAINTEXT needs sasl.jaas.config, or sasl.username and sasl.password"},
	}
	for _, tt := range tests {
		_, err := ValidateMirrorConfig(parse(t, tt.in))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
		var se *SettingError
		if !errors.As(err, &se) {
			t.Errorf("%s: err is not a *SettingError", tt.name)
		}
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	_, err := ValidateMirrorConfig(parse(t, "mirror.gap.policy=x\nmirror.max.inflight=0"))
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 problems, one per line, got %q", lines)
	}
}

func TestValidateWarnings(t *testing.T) {
	warnings, err := ValidateMirrorConfig(parse(t, `bootstrap.servers=a:1
mirror.gap.polcy=fail
mirror.completely.unrelated=1
sasl.mechanisms=PLAIN
request.timeout.ms=3000
sasl.mechanism=PLAIN`))
	if err != nil {
		t.Fatalf("unknown keys must not fail validation: %v", err)
	}
	want := []string{
		`line 2: unknown setting "mirror.gap.polcy" (did you mean "mirror.gap.policy"?)`,
		`line 3: unknown setting "mirror.completely.unrelated" (ignored)`,
		`line 4: unknown setting "sasl.mechanisms" (did you mean "sasl.mechanism"?)`,
		`line 5: unknown setting "request.timeout.ms" (ignored)`,
		`line 6: sasl.mechanism is ignored unless security.protocol is SASL_PLAINTEXT or SASL_SSL`,
	}
	if !reflect.DeepEqual(warnings, want) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(warnings, "\n"), strings.Join(want, "\n"))
	}
}

func TestLevenshtein(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "", 3}, {"", "ab", 2}, {"kitten", "sitting", 3},
		{"mirror.gap.polcy", "mirror.gap.policy", 1}, {"flaw", "lawn", 2},
	}
	for _, tt := range tests {
		if got := levenshtein(tt.a, tt.b); got != tt.want {
			t.Errorf("levenshtein(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestSplitList(t *testing.T) {
	got := SplitList(` a , b{1,3},, [x,y]  ,c\,d, (e|f,g) `)
	want := []string{"a", "b{1,3}", "[x,y]", `c\,d`, "(e|f,g)"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SplitList = %q, want %q", got, want)
	}
	if SplitList("  ") != nil {
		t.Error("blank list is not empty")
	}
}

func TestParseMirrorSettings(t *testing.T) {
	s, err := ParseMirrorSettings(parse(t, "bootstrap.servers=a:1"))
	if err != nil || !reflect.DeepEqual(s, DefaultMirrorSettings()) {
		t.Fatalf("defaults: %+v, %v", s, err)
	}
	if s.RetryInitialBackoff != 100*time.Millisecond || s.RetryMaxBackoff != 300*time.Second || s.RetryMaxAttempts != 20 {
		t.Fatalf("retry defaults changed: %+v", s)
	}
	s, err = ParseMirrorSettings(parse(t, `bootstrap.servers=a:1
mirror.num.fetchers=3
mirror.gap.policy=fill
mirror.metadata.refresh.interval.ms=5000
mirror.failed.retry.initial.backoff.ms=50
mirror.failed.retry.max.backoff.ms=9000
mirror.failed.retry.max.attempts=7
mirror.topics.exclude=a.*,b
mirror.topic.properties.exclude=retention.ms
mirror.acl.include=orders.*
mirror.groups.include=g1
mirror.groups.exclude=
mirror.replication.throttled.rate=1048576
mirror.unclean.leader.election.enable=true
mirror.max.inflight=1
mirror.state.checkpoint.interval.ms=2500
mirror.destination.write.guard=acl`))
	if err != nil {
		t.Fatal(err)
	}
	want := MirrorSettings{NumFetchers: 3, GapPolicy: "fill", MetadataRefresh: 5 * time.Second,
		RetryInitialBackoff: 50 * time.Millisecond, RetryMaxBackoff: 9 * time.Second, RetryMaxAttempts: 7,
		TopicsExclude: []string{"a.*", "b"}, TopicPropertiesExclude: []string{"retention.ms"},
		ACLInclude: []string{"orders.*"}, GroupsInclude: []string{"g1"}, GroupsExclude: nil,
		ThrottledRate: 1 << 20, UncleanLeaderElection: true, MaxInflight: 1, CheckpointInterval: 2500 * time.Millisecond, WriteGuard: "acl"}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("settings:\n%+v\nwant\n%+v", s, want)
	}
	if _, err := ParseMirrorSettings(parse(t, "mirror.num.fetchers=1")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid config parsed: %v", err)
	}
	if d := millis(1 << 62); d != time.Duration(1<<63-1) {
		t.Fatalf("millis did not saturate: %v", d)
	}
}

func TestWriteGuardSetting(t *testing.T) {
	base := map[string]string{KeyBootstrapServers: "a:9092"}
	s, err := ParseMirrorSettings(FromMap(base))
	if err != nil || s.WriteGuard != WriteGuardNone {
		t.Fatalf("default: %q, %v; want %q", s.WriteGuard, err, WriteGuardNone)
	}
	base[KeyWriteGuard] = "acl"
	if s, err = ParseMirrorSettings(FromMap(base)); err != nil || s.WriteGuard != WriteGuardACL {
		t.Fatalf("acl: %q, %v", s.WriteGuard, err)
	}
	base[KeyWriteGuard] = "deny"
	if _, err = ParseMirrorSettings(FromMap(base)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), KeyWriteGuard) {
		t.Fatalf("bad value: %v, want an error naming %s", err, KeyWriteGuard)
	}
}
