package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// StandardAuthorizer is the authorizer [Authorizer] turns on: KRaft's,
// which keeps ACLs in the metadata log (Kafka 3.2 and later).
const StandardAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

// anonymous is the principal of every plaintext listener: EXTERNAL,
// INTERNAL and CONTROLLER.
const anonymous = "User:ANONYMOUS"

// Authorizer turns on ACLs on every node, as a cluster with per-application
// principals runs: [StandardAuthorizer], with allow.everyone.if.no.acl.found
// false, so that a principal may do only what an ACL allows it.
//
// The super users are User:ANONYMOUS, the principal of the three plaintext
// listeners, so that replication, the quorum and the readiness check work
// without ACLs; and User:<name> for each of superUsers, users of [SASLSSL]
// that should be allowed everything. This leaves the EXTERNAL listener
// (BootstrapAddrs) open to every client as a super user: grant ACLs
// through it ([Cluster.Grant]) and test the SASL_SSL users against them.
//
// The three properties (authorizer.class.name, super.users,
// allow.everyone.if.no.acl.found) are set as [BrokerConfig] sets them, so a
// BrokerConfig of the same key given after Authorizer replaces its value.
func Authorizer(superUsers ...string) Opt {
	return func(c *config) error {
		supers := []string{anonymous}
		for _, u := range superUsers {
			if err := saslWord(u); err != nil {
				return fmt.Errorf("Authorizer: super user %q: %w", u, err)
			}
			p := "User:" + u
			if p == anonymous {
				return fmt.Errorf("Authorizer: super user %q: %s is always a super user (the principal of the plaintext listeners)", u, anonymous)
			}
			for _, s := range supers {
				if s == p {
					return fmt.Errorf("Authorizer: super user %q given twice", u)
				}
			}
			supers = append(supers, p)
		}
		if c.brokerConfig == nil {
			c.brokerConfig = make(map[string]string)
		}
		c.brokerConfig["authorizer.class.name"] = StandardAuthorizer
		c.brokerConfig["super.users"] = strings.Join(supers, ";")
		c.brokerConfig["allow.everyone.if.no.acl.found"] = "false"
		return nil
	}
}

// Grant creates the ACLs b describes (see kadm.ACLBuilder; principals are
// written "User:name"), as User:ANONYMOUS over the plaintext client
// listeners, and returns once every node's authorizer holds every one of
// them: a node applies ACLs from the metadata log, and one that has not
// yet would refuse a request the ACL allows. ctx bounds the whole.
//
// The cluster needs [Authorizer]; without it Kafka refuses the creation
// (SECURITY_DISABLED) and Grant says so.
func (c *Cluster) Grant(ctx context.Context, b *kadm.ACLBuilder) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapAddrs()...), c.DirectDial())
	if err != nil {
		return fmt.Errorf("kafkatest: Grant: %w", err)
	}
	defer cl.Close()
	created, err := kadm.NewClient(cl).CreateACLs(ctx, b)
	if err != nil {
		return fmt.Errorf("kafkatest: Grant: %w", err)
	}
	if len(created) == 0 {
		return errors.New("kafkatest: Grant: the builder describes no ACL (name a resource, a principal and an operation)")
	}
	var errs []error
	for _, r := range created {
		if r.Err == nil {
			continue
		}
		if errors.Is(r.Err, kerr.SecurityDisabled) {
			return fmt.Errorf("kafkatest: Grant: %s: the cluster has no authorizer (start it with Authorizer): %w", describeACL(r), r.Err)
		}
		errs = append(errs, fmt.Errorf("%s: %w (%s)", describeACL(r), r.Err, r.ErrMessage))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kafkatest: Grant: %w", err)
	}
	for _, n := range c.nodes {
		for _, r := range created {
			if err := awaitACL(ctx, cl.Broker(int(n.id)), r); err != nil {
				return fmt.Errorf("kafkatest: Grant: node %d: %s: %w", n.id, describeACL(r), err)
			}
		}
	}
	return nil
}

// describeACL says what one ACL allows or denies, for errors.
func describeACL(r kadm.CreateACLsResult) string {
	return fmt.Sprintf("%s %s %s from %s on %s %s %q", r.Permission, r.Principal, r.Operation, r.Host, r.Pattern, r.Type, r.Name)
}

// awaitACL asks broker, until it shows the ACL r created or ctx ends,
// which ACLs match r exactly.
func awaitACL(ctx context.Context, broker *kgo.Broker, r kadm.CreateACLsResult) error {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = r.Type
	req.ResourceName = kmsg.StringPtr(r.Name)
	req.ResourcePatternType = r.Pattern
	req.Principal = kmsg.StringPtr(r.Principal)
	req.Host = kmsg.StringPtr(r.Host)
	req.Operation = r.Operation
	req.PermissionType = r.Permission
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := req.RequestWith(ctx, broker)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil {
			for _, res := range resp.Resources {
				if len(res.ACLs) > 0 {
					return nil
				}
			}
			err = errors.New("not applied yet")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the node does not show the ACL (%v): %w", err, ctx.Err())
		case <-tick.C:
		}
	}
}
