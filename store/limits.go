package store

// Limits are the plan quotas. chatd is self-hosted, so the defaults are
// generous; they exist so that one runaway client cannot fill the disk.
// Exceeding one answers 403 limit_reached naming the resource, the limit and
// the current count.
type Limits struct {
	AgentsPerUser int // live agents one human may own
	TagsPerAgent  int // tags on one agent
}

// DefaultLimits are the quotas used for fields left zero.
var DefaultLimits = Limits{
	AgentsPerUser: 1000,
	TagsPerAgent:  20,
}

func (l Limits) withDefaults() Limits {
	if l.AgentsPerUser <= 0 {
		l.AgentsPerUser = DefaultLimits.AgentsPerUser
	}
	if l.TagsPerAgent <= 0 {
		l.TagsPerAgent = DefaultLimits.TagsPerAgent
	}
	return l
}
