package lockward

import (
	"context"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"lockward.dev/go/lockwardpb"
)

// inspect is name's holder as the store shows it, or nil when free.
func (s *redisStore) inspect(ctx context.Context, name string) (*Holder, error) {
	if err := checkRequest([]string{name}, minTTL); err != nil {
		return nil, err
	}
	k := s.keys(name)
	reply, err := s.run(ctx, "inspect", []string{k.lock, k.fence, k.holder, k.queue})
	if err != nil {
		return nil, err
	}
	if len(reply) < 5 {
		return nil, s.protocol("unexpected inspect reply")
	}
	owner, held := reply[0].(string)
	pttl, _ := asInt(reply[1])
	if !held || pttl == -2 {
		return nil, nil
	}
	row := &Holder{Name: name, Owner: owner, Holding: lockwardpb.Holding_HOLDING_LOCK}
	// The counter is the holder's fence only when lockward wrote the key.
	if fence, ok := asInt(reply[2]); ok && fence > 0 && isOwnerID(owner) {
		f := uint64(fence)
		row.Fence = &f
	}
	if label, ok := reply[3].(string); ok {
		row.Label = &label
	}
	if pttl >= 0 {
		ms := uint64(pttl)
		row.ExpiresInMs = &ms
	}
	if waiters, ok := asInt(reply[4]); ok && waiters >= 0 {
		w := uint64(waiters)
		row.Waiters = &w
	}
	return row, nil
}

// list is every held lock whose name starts with prefix, by name.
func (s *redisStore) list(ctx context.Context, prefix string) ([]*Holder, error) {
	pattern := scanPattern(s.prefix, prefix, s.cluster)
	var keys []string
	scan := func(ctx context.Context, node redis.UniversalClient) error {
		iter := node.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		return iter.Err()
	}
	var err error
	if cluster, ok := s.rdb.(*redis.ClusterClient); ok {
		var mu = make(chan struct{}, 1)
		err = cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			mu <- struct{}{}
			defer func() { <-mu }()
			return scan(ctx, node)
		})
	} else {
		err = scan(ctx, s.rdb)
	}
	if err != nil {
		return nil, s.failed(err)
	}
	var rows []*Holder
	for _, key := range keys {
		name, ok := nameOfKey(strings.TrimPrefix(key, s.prefix), s.cluster)
		if !ok {
			continue
		}
		row, err := s.inspect(ctx, name)
		if err != nil {
			return nil, err
		}
		if row != nil {
			rows = append(rows, row)
		}
	}
	slices.SortFunc(rows, func(a, b *Holder) int { return strings.Compare(a.Name, b.Name) })
	return rows, nil
}

// scanPattern matches the lock keys of the names that start with prefix.
func scanPattern(keyPrefix, namePrefix string, cluster bool) string {
	var pattern strings.Builder
	for _, c := range keyPrefix {
		if strings.ContainsRune(`*?[]\`, c) {
			pattern.WriteByte('\\')
		}
		pattern.WriteRune(c)
	}
	if cluster {
		pattern.WriteByte('{')
	}
	pattern.WriteString(escapeName(namePrefix))
	pattern.WriteByte('*')
	return pattern.String()
}

// nameOfKey is the name whose lock key is key (after the prefix); false
// for the other keys of a name (its fence, its line) and keys not ours.
func nameOfKey(key string, cluster bool) (string, bool) {
	if cluster {
		inner, ok := strings.CutPrefix(key, "{")
		if !ok {
			return "", false
		}
		if key, ok = strings.CutSuffix(inner, "}"); !ok {
			return "", false
		}
	}
	var out []byte
	for i := 0; i < len(key); i++ {
		switch key[i] {
		case ':':
			return "", false
		case '%':
			if i+2 >= len(key) {
				return "", false
			}
			var b byte
			for _, h := range key[i+1 : i+3] {
				b <<= 4
				switch {
				case h >= '0' && h <= '9':
					b |= byte(h - '0')
				case h >= 'A' && h <= 'F':
					b |= byte(h - 'A' + 10)
				case h >= 'a' && h <= 'f':
					b |= byte(h - 'a' + 10)
				default:
					return "", false
				}
			}
			out = append(out, b)
			i += 2
		default:
			out = append(out, key[i])
		}
	}
	return string(out), true
}

// isOwnerID says whether owner is one lockward wrote: 32 hex digits.
func isOwnerID(owner string) bool {
	if len(owner) != 32 {
		return false
	}
	for _, c := range owner {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}
