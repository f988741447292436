package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kconsist/kconsist/admin"
	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/factory"
)

func (a *app) topicCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topic",
		Short: "Create or delete topics, and wait until every broker has applied it",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("topic: want a subcommand: create or delete")
		},
	}
	cmd.AddCommand(a.topicCreateCommand(), a.topicDeleteCommand())
	return cmd
}

func (a *app) topicCreateCommand() *cobra.Command {
	var (
		partitions  int32
		rf          int16
		configs     []string
		wait        bool
		ifNotExists bool
	)
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a topic",
		Long: `Create a topic. With --wait, return only once every broker of the cluster
has applied the creation and lists every partition with a leader: a
producer or consumer started next, in any language, finds the topic on
whichever broker it asks. The output carries the creation's token.

With --if-not-exists a topic that exists already is no error: exit 0,
"created": false in JSON, and a warning on stderr when its partition
count or replication factor is not the one asked (configs are not
compared); the topic is left as it is. With --wait the command still
waits until every broker has applied every change made so far (the
cluster's committed token) and serves every partition of the topic, so
a script that creates its topics can simply be run again.`,
		Example: `  kconsist -b localhost:9092 topic create orders --partitions 6 --replication-factor 3 --wait
  kconsist -b localhost:9092 topic create audit --config retention.ms=86400000 --config cleanup.policy=compact --wait -o json
  kconsist -b localhost:9092 topic create orders -p 6 -r 3 --if-not-exists --wait`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if name == "" {
				return usagef("topic create: empty topic name")
			}
			// --config here is both kafka-topics.sh's topic config
			// (key=value) and the client.properties file of every verb.
			var topicConfigs []string
			for _, c := range configs {
				if strings.Contains(c, "=") {
					topicConfigs = append(topicConfigs, c)
					continue
				}
				if a.configFile != "" && a.configFile != c {
					return usagef("--config %q: want key=value, or one client.properties file (already %q)", c, a.configFile)
				}
				a.configFile = c
			}
			cfg, err := parseKV("--config", topicConfigs)
			if err != nil {
				return err
			}
			var kcfg map[string]*string
			if len(cfg) > 0 {
				kcfg = make(map[string]*string, len(cfg))
				for k, v := range cfg {
					kcfg[k] = &v
				}
			}
			return a.admin(cmd.Context(), func(ctx context.Context, f *factory.Factory, adm *admin.Client) (map[string]any, error) {
				resp, err := adm.CreateTopic(ctx, partitions, rf, kcfg, name)
				if err == nil {
					err = resp.Err
				}
				if ifNotExists && errors.Is(err, kerr.TopicAlreadyExists) {
					return a.existing(ctx, f, name, partitions, rf, wait)
				}
				if err != nil {
					return nil, fmt.Errorf("creating topic %s: %w", name, err)
				}
				a.say("created topic %s (%d partitions, replication factor %d)", name, resp.NumPartitions, resp.ReplicationFactor)
				out := map[string]any{"topic": name, "created": true, "partitions": resp.NumPartitions, "replication_factor": resp.ReplicationFactor}
				return out, a.after(ctx, f, wait, []string{name}, out)
			})
		},
	}
	fl := cmd.Flags()
	fl.Int32VarP(&partitions, "partitions", "p", -1, "number of partitions (-1: the broker's num.partitions)")
	fl.Int16VarP(&rf, "replication-factor", "r", -1, "replication factor (-1: the broker's default.replication.factor)")
	fl.StringArrayVarP(&configs, "config", "c", nil, "topic config key=value (repeatable); a value without = is the client.properties file, as for every verb")
	fl.BoolVarP(&wait, "wait", "w", false, "return once every broker has applied the creation")
	fl.BoolVar(&ifNotExists, "if-not-exists", false, "a topic that exists already is no error (exit 0, \"created\": false); a partition count or replication factor other than asked is a warning")
	return cmd
}

// existing reports a topic that exists already (topic create
// --if-not-exists): its partitions and replication factor, read from the
// cluster once this factory holds the cluster's committed token (every
// change so far, the topic's creation among them), with a warning when
// they are not what was asked; with wait, waits until every broker has
// applied that token and serves the topic.
func (a *app) existing(ctx context.Context, f *factory.Factory, name string, partitions int32, rf int16, wait bool) (map[string]any, error) {
	tok, err := f.CommittedToken(ctx)
	if err != nil {
		return nil, fmt.Errorf("topic %s exists; asking the cluster's committed token: %w", name, err)
	}
	cf, err := f.WithToken(ctx, tok)
	if err != nil {
		return nil, err
	}
	defer cf.Close(context.WithoutCancel(ctx))
	adm, err := cf.Admin()
	if err != nil {
		return nil, err
	}
	defer func() { _ = adm.Close(context.WithoutCancel(ctx)) }()
	details, err := adm.ListTopics(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("topic %s exists; describing it: %w", name, err)
	}
	d, ok := details[name]
	if !ok || d.Err != nil {
		if ok {
			err = d.Err
		}
		return nil, fmt.Errorf("topic %s exists, but describing it failed: %v (deleted meanwhile?)", name, err)
	}
	has, hasRF := int32(len(d.Partitions)), int16(d.Partitions.NumReplicas())
	out := map[string]any{"topic": name, "created": false, "partitions": has, "replication_factor": hasRF}
	a.say("topic %s exists already (%d partitions, replication factor %d): not created", name, has, hasRF)
	var warnings []string
	if partitions > 0 && partitions != has {
		warnings = append(warnings, fmt.Sprintf("topic %s exists with %d partitions, not the %d asked; left as it is", name, has, partitions))
	}
	if rf > 0 && rf != hasRF {
		warnings = append(warnings, fmt.Sprintf("topic %s exists with replication factor %d, not the %d asked; left as it is", name, hasRF, rf))
	}
	for _, w := range warnings {
		fmt.Fprintf(a.stderr, "kconsist: warning: %s\n", w)
	}
	if len(warnings) > 0 {
		out["warnings"] = warnings
	}
	return out, a.after(ctx, cf, wait, []string{name}, out)
}

func (a *app) topicDeleteCommand() *cobra.Command {
	var wait bool
	cmd := &cobra.Command{
		Use:   "delete NAME...",
		Short: "Delete topics",
		Long: `Delete topics. With --wait, return only once every broker of the cluster
has applied the deletion, so that no broker lists them any more.

Each topic's outcome is reported: "deleted topic T" or "not deleted: topic
T: why" (in JSON, "topics" lists {topic, deleted, error} in the order
given, with "deleted" and "not_deleted" name lists). When some topics
were not deleted, the others still are (and waited for with --wait), and
the command exits 1; the JSON object then carries the error too.`,
		Example: `  kconsist -b localhost:9092 topic delete orders audit --wait`,
		Args:    args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var topics []string
			for _, t := range args {
				if t == "" {
					return usagef("topic delete: empty topic name")
				}
				if !slices.Contains(topics, t) {
					topics = append(topics, t)
				}
			}
			return a.admin(cmd.Context(), func(ctx context.Context, f *factory.Factory, adm *admin.Client) (map[string]any, error) {
				resps, err := adm.DeleteTopics(ctx, topics...)
				if err != nil {
					return nil, fmt.Errorf("deleting topics: %w", err)
				}
				var (
					results []map[string]any
					deleted = []string{}
					failed  = []string{}
					why     []string
				)
				for _, t := range topics {
					res := map[string]any{"topic": t}
					r, ok := resps[t]
					err := r.Err
					if !ok {
						err = errors.New("the cluster did not answer for it")
					}
					if err != nil {
						res["deleted"], res["error"] = false, err.Error()
						failed = append(failed, t)
						why = append(why, fmt.Sprintf("%s (%v)", t, err))
						a.say("not deleted: topic %s: %v", t, err)
					} else {
						res["deleted"] = true
						deleted = append(deleted, t)
						a.say("deleted topic %s", t)
					}
					results = append(results, res)
				}
				out := map[string]any{"topics": results, "deleted": deleted, "not_deleted": failed}
				if len(deleted) > 0 {
					if err := a.after(ctx, f, wait, nil, out); err != nil {
						return nil, resultError{err, out}
					}
				}
				if len(failed) > 0 {
					return nil, resultError{fmt.Errorf("deleted %d of %d topics; not deleted: %s", len(deleted), len(topics), strings.Join(why, ", ")), out}
				}
				return out, nil
			})
		},
	}
	cmd.Flags().BoolVarP(&wait, "wait", "w", false, "return once every broker has applied the deletion")
	return cmd
}

func (a *app) configCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Alter topic configs, and wait until every broker has applied it",
		Args:  args(cobra.NoArgs),
		RunE:  func(cmd *cobra.Command, _ []string) error { return usagef("config: want a subcommand: alter") },
	}
	var (
		topic string
		set   []string
		del   []string
		wait  bool
	)
	alter := &cobra.Command{
		Use:   "alter --topic TOPIC --set key=value...",
		Short: "Set or delete topic configs",
		Long: `Set (--set) or delete (--delete, back to the default) configs of a topic,
incrementally: configs not named keep their value. With --wait, return
only once every broker has applied the change.`,
		Example: `  kconsist -b localhost:9092 config alter --topic orders --set retention.ms=3600000 --wait
  kconsist -b localhost:9092 config alter --topic orders --delete cleanup.policy`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if topic == "" {
				return usagef("config alter: --topic is required")
			}
			sets, err := parseKV("--set", set)
			if err != nil {
				return err
			}
			if len(sets) == 0 && len(del) == 0 {
				return usagef("config alter: nothing to change: give --set key=value or --delete key")
			}
			var alters []kadm.AlterConfig
			for _, k := range sortedKeys(sets) {
				alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(sets[k])})
			}
			for _, k := range del {
				if strings.TrimSpace(k) == "" {
					return usagef("config alter: --delete with an empty key")
				}
				alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
			}
			return a.admin(cmd.Context(), func(ctx context.Context, f *factory.Factory, adm *admin.Client) (map[string]any, error) {
				resps, err := adm.AlterTopicConfigs(ctx, alters, topic)
				if err != nil {
					return nil, fmt.Errorf("altering configs of topic %s: %w", topic, err)
				}
				for _, r := range resps {
					if r.Err != nil {
						return nil, fmt.Errorf("altering configs of topic %s: %w", r.Name, r.Err)
					}
				}
				a.say("altered %d config(s) of topic %s", len(alters), topic)
				out := map[string]any{"topic": topic, "set": sets, "deleted": del}
				return out, a.after(ctx, f, wait, nil, out)
			})
		},
	}
	fl := alter.Flags()
	fl.StringVarP(&topic, "topic", "t", "", "the topic whose configs to alter")
	fl.StringArrayVar(&set, "set", nil, "config key=value to set (repeatable)")
	fl.StringArrayVar(&del, "delete", nil, "config key to delete, back to its default (repeatable)")
	fl.BoolVarP(&wait, "wait", "w", false, "return once every broker has applied the change")
	cmd.AddCommand(alter)
	return cmd
}

// admin connects, runs do with an admin client under --timeout, and prints
// what it returns as JSON with -o json.
func (a *app) admin(ctx context.Context, do func(context.Context, *factory.Factory, *admin.Client) (map[string]any, error)) error {
	a.begin()
	ctx, cancel := a.timed(ctx)
	defer cancel()
	f, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer f.Close(context.Background())
	adm, err := f.Admin()
	if err != nil {
		return err
	}
	defer func() { _ = adm.Close(context.WithoutCancel(ctx)) }()
	out, err := do(ctx, f, adm)
	if err != nil {
		return err
	}
	if a.json {
		a.emit(out)
	}
	return nil
}

// after puts the factory's token, the change's, in out and, with wait,
// waits until every broker has applied it (and serves topics).
func (a *app) after(ctx context.Context, f *factory.Factory, wait bool, topics []string, out map[string]any) error {
	tok := f.Token()
	if !tok.IsUnknown() {
		out["token"] = tok.Encode()
		out["cluster"] = tok.ClusterID()
		out["offset"] = tok.Offset()
	}
	out["waited"] = wait
	if !wait {
		if !tok.IsUnknown() {
			a.say("token %s", tok.Encode())
		}
		return nil
	}
	if tok.IsUnknown() && len(topics) == 0 {
		return errors.New("the cluster gave no consistency token for the change (consistency.mode off, or a broker that reports no metadata offset): nothing to wait for")
	}
	start := time.Now()
	brokers, err := a.wait(ctx, f, tok, topics)
	if err != nil {
		return err
	}
	out["brokers"] = brokers
	out["waited_ms"] = time.Since(start).Milliseconds()
	a.say("every broker (%d) has applied it: token %s", len(brokers), tokOrNone(tok))
	return nil
}

func tokOrNone(tok consistency.Token) string {
	if tok.IsUnknown() {
		return "(none)"
	}
	return tok.Encode()
}
