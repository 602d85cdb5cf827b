package props

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Keys of a mirror configuration: source client settings and mirror.* settings.
const (
	KeyBootstrapServers       = "bootstrap.servers"
	KeySecurityProtocol       = "security.protocol"
	KeySASLMechanism          = "sasl.mechanism"
	KeySASLJAASConfig         = "sasl.jaas.config"
	KeySASLUsername           = "sasl.username"
	KeySASLPassword           = "sasl.password"
	KeyOAuthTokenEndpoint     = "sasl.oauthbearer.token.endpoint.url"
	KeyNumFetchers            = "mirror.num.fetchers"
	KeyGapPolicy              = "mirror.gap.policy"
	KeyMetadataRefresh        = "mirror.metadata.refresh.interval.ms"
	KeyRetryInitialBackoff    = "mirror.failed.retry.initial.backoff.ms"
	KeyRetryMaxBackoff        = "mirror.failed.retry.max.backoff.ms"
	KeyRetryMaxAttempts       = "mirror.failed.retry.max.attempts"
	KeyTopicsExclude          = "mirror.topics.exclude"
	KeyTopicPropertiesExclude = "mirror.topic.properties.exclude"
	KeyACLInclude             = "mirror.acl.include"
	KeyGroupsInclude          = "mirror.groups.include"
	KeyGroupsExclude          = "mirror.groups.exclude"
	KeyThrottledRate          = "mirror.replication.throttled.rate"
	KeyUncleanLeaderElection  = "mirror.unclean.leader.election.enable"
	KeyMaxInflight            = "mirror.max.inflight"
	KeyCheckpointInterval     = "mirror.state.checkpoint.interval.ms"
	KeyWriteGuard             = "mirror.destination.write.guard"
	KeyTopicsInclude          = "mirror.topics.include"
	KeyFetchMaxBytes          = "mirror.fetch.max.bytes"
	KeyFetchWaitMax           = "mirror.fetch.wait.max.ms"
	KeyFetchMinBytes          = "mirror.fetch.min.bytes"
	KeyFetchResponseMaxBytes  = "mirror.fetch.response.max.bytes"
)

// Values of mirror.destination.write.guard.
const (
	WriteGuardNone = "none" // mirrored topics stay writable by anyone the destination lets write
	WriteGuardACL  = "acl"  // DENY WRITE ACLs keep other principals out while a topic is mirrored
)

// ErrInvalid matches every *SettingError.
var ErrInvalid = errors.New("invalid mirror configuration")

// SettingError is one invalid setting; Line is 0 when the setting is missing
// or did not come from a file.
type SettingError struct {
	Line int
	Key  string
	Msg  string
}

func (e *SettingError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s: %s", e.Line, e.Key, e.Msg)
	}
	return e.Key + ": " + e.Msg
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *SettingError) Is(target error) bool { return target == ErrInvalid }

// mirrorKeys are the mirror's own settings, under their stored spelling
// (see kipNames), each with its check.
var mirrorKeys = keyChecks(mirrorSettings)

// known maps every setting of a mirror configuration to its check.
var known = func() map[string]check {
	m := make(map[string]check, len(clientKeys)+len(mirrorKeys))
	for k, c := range clientKeys {
		m[k] = c
	}
	for k, c := range mirrorKeys {
		m[k] = c
	}
	return m
}()

// KnownKeys returns every setting kmirror reads under its primary name,
// sorted.
func KnownKeys() []string {
	keys := make([]string, 0, len(known))
	for k := range known {
		keys = append(keys, PrimaryName(k))
	}
	slices.Sort(keys)
	return keys
}

// ValidateMirrorConfig checks a mirror configuration (source client settings
// plus mirror.* settings). Every invalid setting is reported, each on its own
// line of the joined error, so the operator fixes the file in one go.
// Unknown settings are warnings, with the closest known key when one is
// within three edits: a typo must not be silently ignored, but a Kafka client
// setting kmirror does not use must not stop a mirror either.
func ValidateMirrorConfig(p Properties) (warnings []string, err error) {
	warnings, errs := checkEntries(p, known)
	entry := func(k string) (Entry, bool) {
		for _, e := range p.Entries {
			if Canonical(e.Key) == k {
				return e, true
			}
		}
		return Entry{Key: k}, false
	}
	bad := func(e Entry, format string, args ...any) {
		errs = append(errs, &SettingError{Line: e.Line, Key: e.Key, Msg: fmt.Sprintf(format, args...)})
	}
	if e, ok := entry(KeyBootstrapServers); !ok {
		bad(e, "required: the source cluster's brokers as host:port[,host:port...]")
	}
	initial, iok := entry(KeyRetryInitialBackoff)
	maxb, mok := entry(KeyRetryMaxBackoff)
	if iok && mok {
		i, err1 := strconv.ParseInt(strings.TrimSpace(initial.Value), 10, 64)
		m, err2 := strconv.ParseInt(strings.TrimSpace(maxb.Value), 10, 64)
		if err1 == nil && err2 == nil && i > m {
			bad(initial, "%d is above %s (%d)", i, KeyRetryMaxBackoff, m)
		}
	}
	warnings = append(warnings, checkSASL(p, entry, bad)...)
	return warnings, errors.Join(errs...)
}

// ValidateClientConfig checks a client's own settings (--command-config):
// the same checks, unknown-key warnings and suggestions as a mirror
// configuration's client settings, bootstrap.servers not required.
func ValidateClientConfig(p Properties) (warnings []string, err error) {
	warnings, errs := checkEntries(p, clientKeys)
	entry := func(k string) (Entry, bool) {
		for _, e := range p.Entries {
			if e.Key == k {
				return e, true
			}
		}
		return Entry{Key: k}, false
	}
	bad := func(e Entry, format string, args ...any) {
		errs = append(errs, &SettingError{Line: e.Line, Key: e.Key, Msg: fmt.Sprintf(format, args...)})
	}
	warnings = append(warnings, checkSASL(p, entry, bad)...)
	return warnings, errors.Join(errs...)
}

// checkEntries checks each entry against keys: invalid values are errors,
// unknown keys and old spellings warnings, one setting given under both of
// its spellings an error.
func checkEntries(p Properties, keys map[string]check) (warnings []string, errs []error) {
	first := map[string]Entry{}
	for _, e := range p.Entries {
		key := Canonical(e.Key)
		c, ok := keys[key]
		if !ok {
			warnings = append(warnings, at(e.Line)+suggest(e.Key, keys))
			continue
		}
		if f, dup := first[key]; dup {
			errs = append(errs, &SettingError{Line: e.Line, Key: e.Key, Msg: fmt.Sprintf("set twice: also %s on line %d", f.Key, f.Line)})
			continue
		}
		first[key] = e
		if kip, old := kipNames[e.Key]; old {
			warnings = append(warnings, at(e.Line)+fmt.Sprintf("%s is the old name of %s (KIP-1279): it still works", e.Key, kip))
		}
		if c.ok != nil {
			if err := c.ok(strings.TrimSpace(e.Value)); err != nil {
				errs = append(errs, &SettingError{Line: e.Line, Key: e.Key, Msg: err.Error()})
			}
		}
	}
	return warnings, errs
}

// checkSASL checks that a SASL protocol has credentials and warns about a
// mechanism without SASL.
func checkSASL(p Properties, entry func(string) (Entry, bool), bad func(Entry, string, ...any)) (warnings []string) {
	proto, _ := entry(KeySecurityProtocol)
	sasl := strings.HasPrefix(strings.ToUpper(strings.TrimSpace(proto.Value)), "SASL_")
	if mech, ok := entry(KeySASLMechanism); ok && !sasl {
		warnings = append(warnings, at(mech.Line)+fmt.Sprintf("%s is ignored unless %s is SASL_PLAINTEXT or SASL_SSL", KeySASLMechanism, KeySecurityProtocol))
	}
	mech, _ := entry(KeySASLMechanism)
	_, jaas := entry(KeySASLJAASConfig)
	switch m := strings.ToUpper(strings.TrimSpace(mech.Value)); {
	case !sasl:
	case m == "AWS_MSK_IAM": // credentials from the environment
	case m == "OAUTHBEARER":
		if _, ok := entry(KeyOAuthTokenEndpoint); !ok || !jaas {
			bad(mech, "OAUTHBEARER needs %s and %s with clientId and clientSecret", KeyOAuthTokenEndpoint, KeySASLJAASConfig)
		}
	default:
		_, user := entry(KeySASLUsername)
		_, pass := entry(KeySASLPassword)
		if !jaas && (!user || !pass) {
			bad(proto, "%s needs %s, or %s and %s", proto.Value, KeySASLJAASConfig, KeySASLUsername, KeySASLPassword)
		}
	}
	return warnings
}

func at(line int) string {
	if line > 0 {
		return fmt.Sprintf("line %d: ", line)
	}
	return ""
}

// levenshtein is the edit distance between a and b, by bytes (keys are ASCII).
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// oneOf accepts the allowed values in any case, as Kafka reads enum values
// (sasl_ssl is SASL_SSL).
func oneOf(allowed ...string) check {
	shown := make([]string, len(allowed))  // in errors
	values := make([]string, len(allowed)) // in the docs
	for i, a := range allowed {
		shown[i], values[i] = a, "`"+a+"`"
		if a == "" {
			shown[i], values[i] = `"" (empty)`, "empty"
		}
	}
	return check{values: strings.Join(values, ", ") + " (any case)", ok: func(v string) error {
		if slices.ContainsFunc(allowed, func(a string) bool { return strings.EqualFold(a, v) }) {
			return nil
		}
		return fmt.Errorf("%q is not one of %s", v, strings.Join(shown, ", "))
	}}
}

func intIn(lo, hi int64) check {
	values := fmt.Sprintf("%d to %d", lo, hi)
	if hi == 1<<63-1 {
		values = fmt.Sprintf("%d or more", lo)
	}
	return check{values: values, ok: func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo || n > hi {
			if lo == 0 && (hi == 1<<63-1 || hi == 1<<31-1) {
				return fmt.Errorf("%q is not a non-negative integer", v)
			}
			if hi == 1<<63-1 || hi == 1<<31-1 {
				return fmt.Errorf("%q is not a positive integer", v)
			}
			return fmt.Errorf("%q is not an integer from %d to %d", v, lo, hi)
		}
		return nil
	}}
}

func hostPorts(v string) error {
	if v == "" {
		return errors.New("empty")
	}
	for _, hp := range strings.Split(v, ",") {
		hp = strings.TrimSpace(hp)
		host, port, err := net.SplitHostPort(hp)
		if err != nil || host == "" {
			return fmt.Errorf("%q is not host:port", hp)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q has no valid port", hp)
		}
	}
	return nil
}

func patterns(v string) error {
	for _, p := range SplitList(v) {
		if _, err := regexp.Compile(p); err != nil {
			return fmt.Errorf("pattern %q: %w", p, err)
		}
	}
	return nil
}

// SplitList splits a comma-separated list of patterns or names, trimming
// spaces and dropping empty items. A comma inside (), [] or {} belongs to the
// pattern, so "a{1,3}" stays whole.
func SplitList(v string) []string {
	var out []string
	depth, start := 0, 0
	flush := func(end int) {
		if s := strings.TrimSpace(v[start:end]); s != "" {
			out = append(out, s)
		}
	}
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '\\':
			i++ // an escaped character never opens, closes or splits
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth > 0 {
				depth--
			}
		case ',':
			if depth == 0 {
				flush(i)
				start = i + 1
			}
		}
	}
	flush(len(v))
	return out
}

// MirrorSettings is the typed view of the mirror.* settings, defaults applied.
type MirrorSettings struct {
	NumFetchers            int           // fetchers per source broker
	GapPolicy              string        // "fail" or "fill"
	MetadataRefresh        time.Duration // topic discovery and config/ACL/group sync period
	RetryInitialBackoff    time.Duration
	RetryMaxBackoff        time.Duration
	RetryMaxAttempts       int
	TopicsExclude          []string // RE2 patterns
	TopicPropertiesExclude []string // topic configs never synced
	ACLInclude             []string // acls.include rules; default "*" (every ACL, as KIP-1279 says); an empty acls.include: no ACL sync
	GroupsInclude          []string
	GroupsExclude          []string
	ThrottledRate          int64         // bytes per second; 0: unthrottled
	UncleanLeaderElection  bool          // recover automatically from source unclean elections
	MaxInflight            int           // appends in flight per partition; 1 disables pipelining
	CheckpointInterval     time.Duration // how often a MIRRORING partition's last mirrored offset is written to __mirror_state
	WriteGuard             string        // WriteGuardNone or WriteGuardACL
	TopicsInclude          []string      // names or RE2 patterns of source topics started when they appear
	FetchMaxBytes          int32         // bytes asked per partition per fetch; 0: the engine's default
	FetchWaitMax           time.Duration // long-poll time of one fetch; 0: the engine's default
	FetchMinBytes          int32         // bytes a long-polled fetch waits for; 0: 1
	FetchResponseMaxBytes  int32         // bytes of one fetch response; 0: 64 MiB
}

// DefaultMirrorSettings returns the settings of a mirror that sets nothing.
func DefaultMirrorSettings() MirrorSettings {
	return MirrorSettings{
		NumFetchers:         1,
		GapPolicy:           "fail",
		MetadataRefresh:     60 * time.Second,
		RetryInitialBackoff: 100 * time.Millisecond,
		RetryMaxBackoff:     300 * time.Second,
		RetryMaxAttempts:    20,
		TopicsExclude:       []string{"__.*"},
		TopicPropertiesExclude: []string{
			"follower.replication.throttled.replicas", "leader.replication.throttled.replicas",
			"message.timestamp.type", "message.timestamp.difference.max.ms",
			"message.timestamp.before.max.ms", "message.timestamp.after.max.ms",
			"min.insync.replicas", "unclean.leader.election.enable",
		},
		ACLInclude:         []string{"*"},
		GroupsInclude:      []string{".*"},
		GroupsExclude:      []string{"console-consumer-.*", "__.*"},
		MaxInflight:        5,
		CheckpointInterval: 5 * time.Second,
		WriteGuard:         WriteGuardNone,
	}
}

// ParseMirrorSettings validates p and returns its mirror.* settings on top of
// the defaults. Settings absent from p keep their defaults; a list setting
// that is present replaces the default list.
func ParseMirrorSettings(p Properties) (MirrorSettings, error) {
	if _, err := ValidateMirrorConfig(p); err != nil {
		return MirrorSettings{}, err
	}
	s := DefaultMirrorSettings()
	for _, e := range p.Entries {
		v := strings.TrimSpace(e.Value)
		n, _ := strconv.ParseInt(v, 10, 64) // validated above for numeric keys
		switch Canonical(e.Key) {
		case KeyNumFetchers:
			s.NumFetchers = int(n)
		case KeyGapPolicy:
			s.GapPolicy = strings.ToLower(v)
		case KeyMetadataRefresh:
			s.MetadataRefresh = millis(n)
		case KeyCheckpointInterval:
			s.CheckpointInterval = millis(n)
		case KeyRetryInitialBackoff:
			s.RetryInitialBackoff = millis(n)
		case KeyRetryMaxBackoff:
			s.RetryMaxBackoff = millis(n)
		case KeyRetryMaxAttempts:
			s.RetryMaxAttempts = int(n)
		case KeyTopicsExclude:
			s.TopicsExclude = SplitList(v)
		case KeyTopicPropertiesExclude:
			s.TopicPropertiesExclude = SplitList(v)
		case KeyACLInclude:
			s.ACLInclude = SplitList(v)
		case KeyGroupsInclude:
			s.GroupsInclude = SplitList(v)
		case KeyGroupsExclude:
			s.GroupsExclude = SplitList(v)
		case KeyThrottledRate:
			s.ThrottledRate = n
		case KeyUncleanLeaderElection:
			s.UncleanLeaderElection = strings.EqualFold(v, "true")
		case KeyMaxInflight:
			s.MaxInflight = int(n)
		case KeyWriteGuard:
			s.WriteGuard = strings.ToLower(v)
		case KeyTopicsInclude:
			s.TopicsInclude = SplitList(v)
		case KeyFetchMaxBytes:
			s.FetchMaxBytes = int32(n)
		case KeyFetchWaitMax:
			s.FetchWaitMax = millis(n)
		case KeyFetchMinBytes:
			s.FetchMinBytes = int32(n)
		case KeyFetchResponseMaxBytes:
			s.FetchResponseMaxBytes = int32(n)
		}
	}
	return s, nil
}

// millis converts milliseconds to a Duration, saturating instead of
// overflowing for absurd values.
func millis(n int64) time.Duration {
	if n > int64(1<<63-1)/int64(time.Millisecond) {
		return time.Duration(1<<63 - 1)
	}
	return time.Duration(n) * time.Millisecond
}
