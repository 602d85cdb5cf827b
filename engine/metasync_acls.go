package engine

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// aclRule is one mirror.acl.include rule,
// resourceType;resourceName;operation;permissionType;principal. An Any
// value (from "*") matches everything; principal "" matches every principal.
type aclRule struct {
	resourceType kmsg.ACLResourceType
	name         *regexp.Regexp // whole resource name (or prefix); nil: any
	operation    kmsg.ACLOperation
	permission   kmsg.ACLPermissionType
	principal    string
}

func parseACLRules(rules []string) ([]aclRule, error) {
	var out []aclRule
	var errs []error
	for _, s := range rules {
		r, err := parseACLRule(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("acls.include rule %q: %w", s, err))
			continue
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

func parseACLRule(s string) (aclRule, error) {
	f := strings.Split(s, ";")
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	if len(f) == 1 {
		// A bare pattern selects resources by name, as the setting's
		// older form did.
		f = []string{"*", f[0], "*", "*", "*"}
	}
	if len(f) == 2 {
		// KIP-1279's TYPE;pattern ("TOPIC;orders-.*").
		f = []string{f[0], f[1], "*", "*", "*"}
	}
	if len(f) != 5 {
		return aclRule{}, fmt.Errorf("want 5 fields resourceType;resourceName;operation;permissionType;principal, got %d", len(f))
	}
	r := aclRule{resourceType: kmsg.ACLResourceTypeAny, operation: kmsg.ACLOperationAny, permission: kmsg.ACLPermissionTypeAny}
	var err error
	if f[0] != "*" {
		if r.resourceType, err = kmsg.ParseACLResourceType(f[0]); err != nil {
			return r, err
		}
	}
	if f[1] != "*" && f[1] != "" {
		if r.name, err = regexp.Compile("^(?:" + f[1] + ")$"); err != nil {
			return r, fmt.Errorf("resource name pattern: %w", err)
		}
	}
	if f[2] != "*" {
		if r.operation, err = kmsg.ParseACLOperation(f[2]); err != nil {
			return r, err
		}
	}
	if f[3] != "*" {
		if r.permission, err = kmsg.ParseACLPermissionType(f[3]); err != nil {
			return r, err
		}
	}
	if f[4] != "*" {
		r.principal = f[4]
	}
	return r, nil
}

// aclEntry is one ACL, comparable so existing ones are found by value.
type aclEntry struct {
	resourceType kmsg.ACLResourceType
	name         string
	pattern      kmsg.ACLResourcePatternType
	principal    string
	host         string
	operation    kmsg.ACLOperation
	permission   kmsg.ACLPermissionType
}

func (a aclEntry) String() string {
	return fmt.Sprintf("%s %s:%s %s %s %s from %s", a.permission, a.resourceType, a.name, a.pattern, a.operation, a.principal, a.host)
}

func (r aclRule) matches(a aclEntry) bool {
	return (r.resourceType == kmsg.ACLResourceTypeAny || r.resourceType == a.resourceType) &&
		(r.name == nil || r.name.MatchString(a.name)) &&
		(r.operation == kmsg.ACLOperationAny || r.operation == a.operation) &&
		(r.permission == kmsg.ACLPermissionTypeAny || r.permission == a.permission) &&
		(r.principal == "" || r.principal == a.principal)
}

// wantACL reports whether a source ACL is copied: some rule matches it, and
// an ACL on one named topic is copied only when that topic is mirrored (an
// ACL of a topic the destination does not have would grant access to
// whatever topic of that name appears there later).
func (c *metaSyncConfig) wantACL(a aclEntry, mirrored []string) bool {
	if a.resourceType == kmsg.ACLResourceTypeTopic && a.pattern == kmsg.ACLResourcePatternTypeLiteral &&
		a.name != "*" && !slices.Contains(mirrored, a.name) {
		return false
	}
	return slices.ContainsFunc(c.acls, func(r aclRule) bool { return r.matches(a) })
}

// aclCoversStopped reports whether a topic ACL applies to a topic of this
// mirror that is failed over: a literal ACL naming it, a prefixed one whose
// prefix it starts with, or the literal wildcard. After a failover the
// destination's operators own that topic's access, and an ACL created by a
// later sync would grant the old source's principals access to it.
func (m *mirror) aclCoversStopped(a aclEntry) bool {
	if a.resourceType != kmsg.ACLResourceTypeTopic {
		return false
	}
	return slices.ContainsFunc(m.topicList(), func(t string) bool {
		var covers bool
		switch a.pattern {
		case kmsg.ACLResourcePatternTypeLiteral:
			covers = a.name == t || a.name == "*"
		case kmsg.ACLResourcePatternTypePrefixed:
			covers = strings.HasPrefix(t, a.name)
		default:
			covers = false
		}
		return covers && m.topicStopped(t)
	})
}

// describeACLs lists every ACL of a cluster.
func (c *cluster) describeACLs(ctx context.Context) ([]aclEntry, error) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeAny
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, c.cl)
	if err == nil {
		if err = kerr.ErrorForCode(resp.ErrorCode); err != nil && resp.ErrorMessage != nil {
			err = fmt.Errorf("%w: %s", err, *resp.ErrorMessage)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("describe %s ACLs: %w", c.name, err)
	}
	var out []aclEntry
	for _, res := range resp.Resources {
		for _, a := range res.ACLs {
			out = append(out, aclEntry{
				resourceType: res.ResourceType, name: res.ResourceName, pattern: res.ResourcePatternType,
				principal: a.Principal, host: a.Host, operation: a.Operation, permission: a.PermissionType,
			})
		}
	}
	return out, nil
}

// syncACLs creates on the destination the source ACLs the include rules
// select and the destination lacks. Destination ACLs are never deleted:
// the destination may grant access of its own (the consumers failed over
// to it, the mirror itself). It returns the ACLs created and the source
// ACLs not selected.
//
// A cluster without an authorizer (SECURITY_DISABLED) ends the round
// quietly: a source without one has no ACLs to copy, a destination without
// one cannot hold them, and ACL sync is on by default.
func (m *mirror) syncACLs(ctx context.Context, mirrored []string) (created, skipped int, err error) {
	cfg := m.settings().metaSync
	src, err := m.src.describeACLs(ctx)
	if errors.Is(err, kerr.SecurityDisabled) {
		return 0, 0, cfg.aclErr
	}
	if err != nil {
		return 0, 0, errors.Join(err, cfg.aclErr)
	}
	dst, err := m.e.dst.describeACLs(ctx)
	if errors.Is(err, kerr.SecurityDisabled) {
		return 0, len(src), cfg.aclErr
	}
	if err != nil {
		return 0, 0, errors.Join(err, cfg.aclErr)
	}
	have := make(map[aclEntry]bool, len(dst))
	for _, a := range dst {
		have[a] = true
	}
	var missing []aclEntry
	for _, a := range src {
		switch {
		case !cfg.wantACL(a, mirrored):
			skipped++
		case !have[a]:
			missing = append(missing, a)
		}
	}
	// Checked right before the write: a stop may have landed since the
	// round listed the mirrored topics.
	missing = slices.DeleteFunc(missing, func(a aclEntry) bool {
		if m.aclCoversStopped(a) {
			skipped++
			return true
		}
		return false
	})
	if len(missing) == 0 {
		return 0, skipped, cfg.aclErr
	}
	req := kmsg.NewPtrCreateACLsRequest()
	for _, a := range missing {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = a.resourceType, a.name, a.pattern
		c.Principal, c.Host, c.Operation, c.PermissionType = a.principal, a.host, a.operation, a.permission
		req.Creations = append(req.Creations, c)
	}
	lctx, cancel, err := m.e.gate.leased(ctx)
	defer cancel()
	var resp *kmsg.CreateACLsResponse
	if err == nil {
		resp, err = req.RequestWith(lctx, m.e.dst.cl)
	}
	if err != nil {
		return 0, skipped, errors.Join(fmt.Errorf("create destination ACLs: %w", err), cfg.aclErr)
	}
	errs := []error{cfg.aclErr}
	for i, r := range resp.Results {
		if i >= len(missing) {
			break
		}
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			errs = append(errs, fmt.Errorf("create destination ACL %s: %w", missing[i], err))
			continue
		}
		created++
	}
	if created > 0 {
		m.e.emit(LevelInfo, m.cfg.Name, "", -1, fmt.Sprintf("synced %d ACLs from the source (%d source ACLs not selected by the include rules)", created, skipped))
	}
	return created, skipped, errors.Join(errs...)
}
