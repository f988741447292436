package factory

import (
	"fmt"
	"reflect"
	"strings"
)

// Role is a kind of client a factory makes: for hooks (Hooks, ClientInfo),
// and the key of roleTable. Roles combine with |.
type Role uint8

const (
	// RoleAdmin is a client made by Factory.Admin.
	RoleAdmin Role = 1 << iota
	// RoleProducer is a client made by NewProducer.
	RoleProducer
	// RoleConsumer is a client made by NewConsumer.
	RoleConsumer
	// RoleKgo is a bare franz-go client made by Factory.KgoClient.
	RoleKgo

	// AllRoles is every client the factory hands out.
	AllRoles = RoleAdmin | RoleProducer | RoleConsumer | RoleKgo
)

// kind is what an option sets, and so which clients take it. Every option
// has one (Opt.kind).
type kind uint8

const (
	// kindFactory: the factory as a whole (WithStore, Consistency); only
	// New takes it (Opt).
	kindFactory kind = 1 << iota
	// kindClient: connection, security, logging, hooks, pass-through
	// franz-go options; every client takes it (ClientOpt).
	kindClient
	// kindProduce: a producer's settings, transactions included
	// (ProducerOpt).
	kindProduce
	// kindConsume: a consumer's settings, its topics, its group and the
	// group's rebalance callbacks included (ConsumerOpt).
	kindConsume
)

// roleSpec is one row of roleTable.
type roleSpec struct {
	role  Role
	name  string // Role.String
	ident string // the Go name, for errors
	// takes is the kinds of options the role's constructor takes and
	// whose settings its franz-go client gets: one list, so that no client
	// takes an option it then ignores.
	takes kind
	// opt is the option type the role's constructor takes; it has the
	// marker methods of exactly the kinds in takes (TestRoleTable).
	opt reflect.Type
}

// roleTable says, for each kind of client, which options it takes. The
// option types follow it (TestRoleTable checks each option kind against
// each role's option type), and so do the franz-go options a client gets
// (config.build), the rebalance wiring (config.rebalanceOpts), the
// topics a client consumes and the roles Hooks accepts. A client of
// several roles (RoleTransactSession) takes what each of them takes.
//
// A bare franz-go client does everything: it takes every client option
// and honours each as a producer or a consumer would, a group's rebalance
// callbacks included.
var roleTable = [...]roleSpec{
	{RoleAdmin, "admin", "RoleAdmin", kindClient, reflect.TypeFor[AdminOpt]()},
	{RoleProducer, "producer", "RoleProducer", kindClient | kindProduce, reflect.TypeFor[ProducerOpt]()},
	{RoleConsumer, "consumer", "RoleConsumer", kindClient | kindConsume, reflect.TypeFor[ConsumerOpt]()},
	{RoleKgo, "kgo", "RoleKgo", kindClient | kindProduce | kindConsume, reflect.TypeFor[KgoClientOpt]()},
}

// takes returns the kinds of options the clients of r take: the union of
// its roles' rows. Role 0 is the factory's base as its own clients (cluster
// checks, token questions) use it: they get only its client settings. (New
// still checks every option given to it, as the base of every client.)
func (r Role) takes() kind {
	if r == 0 {
		return kindClient
	}
	var k kind
	for _, s := range roleTable {
		if r&s.role != 0 {
			k |= s.takes
		}
	}
	return k
}

// produces and consumes report whether clients of role r get the
// producer's and the consumer's settings.
func (r Role) produces() bool { return r.takes()&kindProduce != 0 }
func (r Role) consumes() bool { return r.takes()&kindConsume != 0 }

// String names the role: "admin", "producer", "consumer", "kgo", or
// several joined by "|"; bits that name no role as Role(0x..), none as
// "none".
func (r Role) String() string {
	var names []string
	for _, s := range roleTable {
		if r&s.role != 0 {
			names = append(names, s.name)
		}
	}
	if rest := r &^ AllRoles; rest != 0 {
		names = append(names, fmt.Sprintf("Role(%#x)", uint8(rest)))
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "|")
}

// check returns why r names no client, or nil: it must name at least one
// role of roleTable and nothing else.
func (r Role) check() error {
	if rest := r &^ AllRoles; rest != 0 {
		return fmt.Errorf("roles %s: Role(%#x) is no role", r, uint8(rest))
	}
	if r == 0 {
		idents := make([]string, len(roleTable))
		for i, s := range roleTable {
			idents[i] = s.ident
		}
		return fmt.Errorf("roles none: name at least one of %s", strings.Join(idents, ", "))
	}
	return nil
}
