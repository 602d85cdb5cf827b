package props

//go:generate go test . -run TestDocs -update

import (
	"fmt"
	"strings"
)

// Setting is one key kmirror reads from a mirror configuration
// (--mirror-config) or a client configuration (--command-config): how its
// value is checked, and what docs/configuration.md says of it. The tables
// below are the only list of keys: validation, suggestions and the docs all
// come from them, so a key cannot be added without its documentation line.
type Setting struct {
	Key string // as stored in __mirror_state; PrimaryName is the name kmirror shows
	// Default is the value in effect when the key is absent, as it would
	// be written in the file; "" when absence is not a value (see Unset).
	// A test checks that writing it changes nothing.
	Default string
	Unset   string // what leaving the key out means, when Default is ""
	// Alter is what running instances do when an --alter changes the
	// setting (mirror settings only); a test checks it.
	Alter   Alter
	Example string // a valid value other than the default, for the tests
	KIP     bool   // the primary name is the one KIP-1279 gives the setting
	Meaning string
	check   check
}

// Values says which values the setting accepts.
func (s Setting) Values() string { return s.check.values }

// Alter is what an --alter of a setting does to a running mirror.
type Alter int8

const (
	AlterNone    Alter = iota // not a mirror setting (--command-config)
	AlterInPlace              // applied without touching the partitions: they stay MIRRORING
	AlterReopen               // the mirror is reopened on each instance; its partitions realign from their records
)

func (a Alter) String() string {
	switch a {
	case AlterNone:
		return ""
	case AlterInPlace:
		return "in place"
	case AlterReopen:
		return "reopens"
	}
	return fmt.Sprintf("Alter(%d)", int8(a))
}

// check validates one value; values describes what it accepts.
type check struct {
	ok     func(v string) error // nil: any value
	values string
}

func text(values string) check { return check{values: values} }

var (
	hostPortList = check{ok: hostPorts, values: "comma list of host:port"}
	patternList  = check{ok: patterns, values: "comma list of RE2 patterns, each matching whole names"}
	aclRuleList  = check{ok: aclRules, values: "`*`, or a comma list of `TYPE;pattern`, bare name patterns, or `resourceType;resourceName;operation;permissionType;principal`"}
	storeType    = oneOf("PEM", "PKCS12", "JKS")
	secretRef    = text("a secret: in a mirror configuration `${env:NAME}` or `${file:/path:key}`, a literal only with `--allow-plaintext-secrets`; either in `--command-config`")
)

// mirrorSettings are the mirror's own settings, under their stored spelling
// (see kipNames).
var mirrorSettings = []Setting{
	{Key: KeyNumFetchers, Default: "1", Example: "3", Alter: AlterReopen, check: intIn(1, 1<<31-1),
		Meaning: "Fetchers per source broker for this mirror; the mirror's partitions led by one broker are spread over them by topic and partition. Each fetcher dials up to 4 connections of its own, with client id `kmirror-<instance>-<fetcher index>-<mirror>` (for source quotas). Partitions of different mirrors never share a fetcher."},
	{Key: KeyFetchMaxBytes, Default: "1048576", Example: "2097152", Alter: AlterReopen, check: intIn(1, 1<<31-1),
		Meaning: "Bytes asked per partition in each Fetch (the Fetch request's partition max bytes)."},
	{Key: KeyFetchWaitMax, Default: "100", Example: "500", Alter: AlterReopen, check: intIn(1, 1<<31-1),
		Meaning: "Milliseconds a Fetch for caught-up partitions waits at the source broker for data (long poll)."},
	{Key: KeyFetchMinBytes, Default: "1", Example: "1024", Alter: AlterReopen, check: intIn(1, 1<<31-1),
		Meaning: "Bytes a long-polled Fetch waits for before the broker answers."},
	{Key: KeyFetchResponseMaxBytes, Default: "67108864", Example: "1048576", Alter: AlterReopen, check: intIn(1, 1<<31-1),
		Meaning: "Bytes of one Fetch response (the request's max bytes)."},
	{Key: KeyMaxInflight, Default: "5", Example: "1", Alter: AlterReopen, check: intIn(1, 5),
		Meaning: "Batches in flight per destination partition. The broker deduplicates at most 5 per producer, so 5 is the most; 1 turns pipelining off."},
	{Key: KeyThrottledRate, KIP: true, Unset: "unthrottled", Example: "1048576", Alter: AlterInPlace, check: intIn(1, 1<<63-1),
		Meaning: "Bytes per second this mirror appends to the destination, on each instance (two instances sharing the mirror may each append this much)."},
	{Key: KeyGapPolicy, Default: "fail", Example: "fill", Alter: AlterReopen, check: oneOf("fail", "fill"),
		Meaning: "What a partition does where the source log has no record at an offset (compaction holes, batches whose record count does not match their offsets): `fail` stops it FAILED (cause `gap`, waits for `--recover`); `fill` writes tombstones with the key `__kmirror_gap` at the missing offsets, so every other record keeps its offset. Those batches are the only ones kmirror decompresses and rebuilds, within bounds: at most 1,048,576 offsets and 64 MiB decompressed a batch, nothing beyond the source's high watermark; a batch past one fails its partition (cause `bad_source_batch`)."},
	{Key: KeyUncleanLeaderElection, KIP: true, Default: "false", Example: "true", Alter: AlterReopen, check: oneOf("true", "false"),
		Meaning: "After an unclean leader election on the source truncated records that were already mirrored: `false` fails the partition (cause `unclean_leader_election`, waits for `--recover`); `true` quarantines the destination-only records and rebuilds the topic by itself (ULE_RECOVERY)."},
	{Key: KeyTopicsInclude, Unset: "none: only the topics `--start` names or matches", Example: "payments,orders-.*", Alter: AlterInPlace, KIP: true, check: patternList,
		Meaning: "Source topic names or RE2 patterns started when they appear, as a standing `--start` (checked every metadata refresh)."},
	{Key: KeyTopicsExclude, Default: "__.*", Example: "__.*,orders-test", Alter: AlterInPlace, KIP: true, check: patternList,
		Meaning: "Source topics never started, by `--start` or by discovery. A list given replaces the default, so keep `__.*` in it."},
	{Key: KeyMetadataRefresh, KIP: true, Default: "60000", Example: "5000", Alter: AlterInPlace, check: intIn(1, 1<<63-1),
		Meaning: "Milliseconds between metadata syncs: topic discovery, partition growth, deleted source topics, topic configs, ACLs, consumer-group and share-group offsets."},
	{Key: KeyTopicPropertiesExclude, Default: "follower.replication.throttled.replicas,leader.replication.throttled.replicas,message.timestamp.type,message.timestamp.difference.max.ms,message.timestamp.before.max.ms,message.timestamp.after.max.ms,min.insync.replicas,unclean.leader.election.enable",
		Example: "retention.ms", Alter: AlterInPlace, KIP: true, check: text("comma list of topic config names or RE2 patterns of them"),
		Meaning: "Topic configs never copied from the source. `compression.type` and `message.timestamp.type` are never copied whatever this says (destination topics are `compression.type=producer`, `CreateTime`). A list given replaces the default."},
	{Key: KeyACLInclude, Default: "*", Example: "TOPIC;orders-.*,GROUP;app-.*", Alter: AlterInPlace, KIP: true, check: aclRuleList,
		Meaning: "Source ACLs copied to the destination, within the mirror's scope: `*` (the default, as in KIP-1279) selects the ACLs of mirrored topics (literal names; prefixed and wildcard ones only when every destination topic they match is mirrored) and of the groups whose offsets are synced; CLUSTER, USER, DELEGATION_TOKEN and TRANSACTIONAL_ID ACLs only when a `TYPE;pattern` rule (or a five-field rule) names the type. On a mirrored topic READ, DESCRIBE and DESCRIBE_CONFIGS are copied, ALL as READ and DESCRIBE, and WRITE (with the write half of ALL) is held back in `__mirror_state` and granted by `--stop`; DENY ACLs are copied, except those for `User:*`, which are not, and neither are the ALLOWs they override. `acls.include=` with no value turns ACL sync off; a cluster without an authorizer is skipped quietly. ACLs on stopped topics are not copied."},
	{Key: KeyGroupsInclude, Default: ".*", Example: "app-.*", Alter: AlterInPlace, KIP: true, check: patternList,
		Meaning: "Consumer and share groups whose offsets on the mirrored topics are copied, clamped to the destination's log, with leader epoch -1. A group with members on the destination is skipped (it consumes there)."},
	{Key: KeyGroupsExclude, Default: "console-consumer-.*,__.*", Example: "app-test", Alter: AlterInPlace, KIP: true, check: patternList,
		Meaning: "Groups never synced. A list given replaces the default."},
	{Key: KeyCheckpointInterval, Default: "5000", Example: "1000", Alter: AlterInPlace, check: intIn(1, 1<<63-1),
		Meaning: "Milliseconds between checkpoints of a MIRRORING partition's last mirrored offset (LME) in `__mirror_state`, written only when it moved, at most once a second whatever this says; also at every pause, stop, close and revocation."},
	{Key: KeyRetryInitialBackoff, Default: "100", Example: "50", Alter: AlterReopen, check: intIn(1, 1<<63-1),
		Meaning: "Milliseconds before the first retry of a FAILED partition; later retries back off exponentially with full jitter. Not above the max backoff."},
	{Key: KeyRetryMaxBackoff, Default: "300000", Example: "9000", Alter: AlterReopen, check: intIn(1, 1<<63-1),
		Meaning: "Cap of the retry backoff, in milliseconds."},
	{Key: KeyRetryMaxAttempts, Default: "20", Example: "0", Alter: AlterReopen, check: intIn(0, 1<<31-1),
		Meaning: "Retries of a retryable failure before the partition waits for `--recover`; 0: none. A source that does not answer (`source_unreachable`) is waited out with no attempt limit whatever this says."},
	{Key: KeyWriteGuard, Default: WriteGuardNone, Example: WriteGuardACL, Alter: AlterReopen, check: oneOf(WriteGuardNone, WriteGuardACL),
		Meaning: "`acl`: while a topic is mirrored a DENY WRITE ACL for `User:*` keeps every other principal out of it, removed by `--stop` before the partition is STOPPED. kmirror's destination principal must be a super user, and the destination needs an authorizer (`--create` checks). Going back to `none` leaves existing guard ACLs in place."},
}

// clientSettings are the Kafka client settings kmirror reads, for the
// mirror's source (in --mirror-config) and for the destination (in
// --command-config).
var clientSettings = []Setting{
	{Key: KeyBootstrapServers, Unset: "required in a mirror configuration; the destination's come from `--bootstrap-server`", check: hostPortList,
		Meaning: "The source cluster's brokers (in a mirror configuration). `--alter` may point it at other brokers of the same cluster only."},
	{Key: KeySecurityProtocol, Default: "PLAINTEXT", check: oneOf("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
		Meaning: "How to connect."},
	{Key: KeySASLMechanism, Default: "PLAIN", check: oneOf("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM"),
		Meaning: "The SASL mechanism, with a SASL protocol. OAUTHBEARER uses the client credentials grant against `sasl.oauthbearer.token.endpoint.url` with the JAAS `clientId`, `clientSecret` and optional `scope`, keeping each token until 80% of its life; AWS_MSK_IAM signs with `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN` from the environment (no profiles, instance metadata or web identity)."},
	{Key: KeySASLUsername, Unset: "none", check: text("text"),
		Meaning: "User for PLAIN and SCRAM, instead of `sasl.jaas.config`."},
	{Key: KeySASLPassword, Unset: "none", check: secretRef,
		Meaning: "Password for PLAIN and SCRAM, with `sasl.username`."},
	{Key: KeySASLJAASConfig, Unset: "none", check: text("a JAAS line; its password and secret options as references"),
		Meaning: "`username`/`password` for PLAIN and SCRAM, or `clientId`/`clientSecret`/`scope` for OAUTHBEARER. Spaces around `=` are allowed."},
	{Key: KeyOAuthTokenEndpoint, Unset: "none", check: text("URL"),
		Meaning: "The OAUTHBEARER token endpoint."},
	{Key: "ssl.truststore.location", Unset: "the system's roots", check: text("path of a PEM, PKCS12 or JKS file"),
		Meaning: "CA certificates the brokers' certificates are verified against. In a PKCS12 trust store only certificates marked trusted count, as in Java."},
	{Key: "ssl.keystore.location", Unset: "no client certificate", check: text("path of a PEM, PKCS12 or JKS file"),
		Meaning: "The client certificate and its key (mutual TLS). A PEM key may be encrypted (PKCS#8 PBES2 with AES or 3DES, or OpenSSL's legacy form)."},
	{Key: "ssl.key.password", Unset: "PEM: an unencrypted key; PKCS12: the store's password; JKS: `ssl.keystore.password`", check: secretRef,
		Meaning: "Password of the key: of an encrypted PEM key, of a JKS store's key; for PKCS12 (one password for the store and its key, as keytool writes them) read only when `ssl.keystore.password` is unset."},
	{Key: "ssl.keystore.type", Unset: "the file's content decides", check: storeType,
		Meaning: "The format of `ssl.keystore.location`. A type that does not match the file is refused saying what the file is; JCEKS is refused with the keytool command that converts it."},
	{Key: "ssl.truststore.type", Unset: "the file's content decides", check: storeType,
		Meaning: "As `ssl.keystore.type`, for `ssl.truststore.location`."},
	{Key: "ssl.endpoint.identification.algorithm", Default: "https", check: oneOf("https", ""),
		Meaning: "Empty turns host name checks off; the certificate chain is still verified."},
	{Key: "ssl.keystore.password", Unset: "none", check: secretRef,
		Meaning: "Password of a PKCS12 or JKS key store (required for JKS). A wrong one fails at once naming the setting. Not read for PEM."},
	{Key: "ssl.truststore.password", Unset: "none", check: secretRef,
		Meaning: "Password of a PKCS12 (optional) or JKS (required: kmirror does not read a JKS store unchecked) trust store. Not read for PEM."},
	{Key: "client.id", Unset: "none", check: text("text"),
		Meaning: "Accepted and not read: kmirror names its own clients (`kmirror-admin`, `kmirror-observer`, a fetcher's `kmirror-<instance>-<index>-<mirror>`)."},
}

// MirrorSettingsTable returns the mirror.* settings in documentation order.
func MirrorSettingsTable() []Setting { return append([]Setting(nil), mirrorSettings...) }

// ClientSettingsTable returns the client settings in documentation order.
func ClientSettingsTable() []Setting { return append([]Setting(nil), clientSettings...) }

func keyChecks(table []Setting) map[string]check {
	m := make(map[string]check, len(table))
	for _, s := range table {
		m[s.Key] = s.check
	}
	return m
}

// ConfigurationMarkdown is the generated part of docs/configuration.md: a
// table of the mirror settings and one of the client settings.
func ConfigurationMarkdown() string {
	var b strings.Builder
	b.WriteString("### Mirror settings\n\n")
	b.WriteString("| Key | Also read as | Default | Values | `--alter` | Meaning |\n|---|---|---|---|---|---|\n")
	for _, s := range mirrorSettings {
		name := "`" + PrimaryName(s.Key) + "`"
		if s.KIP {
			name += " (KIP-1279)"
		}
		alias := ""
		if PrimaryName(s.Key) != s.Key {
			alias = "`" + s.Key + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", name, alias, defaultCell(s), mdCell(s.check.values), s.Alter, mdCell(s.Meaning))
	}
	b.WriteString("\n### Client settings\n\n")
	b.WriteString("In a mirror configuration they are the source client's; in `--command-config` the destination client's.\n\n")
	b.WriteString("| Key | Default | Values | Meaning |\n|---|---|---|---|\n")
	for _, s := range clientSettings {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", s.Key, defaultCell(s), mdCell(s.check.values), mdCell(s.Meaning))
	}
	return b.String()
}

func defaultCell(s Setting) string {
	if s.Default == "" {
		return mdCell(s.Unset)
	}
	if len(s.Default) > 30 { // a long list: one item per line
		return "`" + strings.ReplaceAll(s.Default, ",", "`,<br>`") + "`"
	}
	return "`" + s.Default + "`"
}

func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
