package store

// Limits are the plan quotas. chatd is self-hosted, so the defaults are
// generous; they exist so that one runaway client cannot fill the disk.
// Exceeding one answers 403 limit_reached naming the resource, the limit and
// the current count.
type Limits struct {
	AgentsPerUser       int // live agents one human may own
	TagsPerAgent        int // tags on one agent
	ChatsPerUser        int // live rooms created by a human and the agents it owns
	ParticipantsPerRoom int // participants of one room
	MessagesPerRoom     int // messages and events in one room
	MemoriesPerAgent    int // memories one agent has stored (any status)
	TasksPerRoom        int // tasks on one room's board (any state)
}

// DefaultLimits are the quotas used for fields left zero.
var DefaultLimits = Limits{
	AgentsPerUser:       1000,
	TagsPerAgent:        20,
	ChatsPerUser:        10000,
	ParticipantsPerRoom: 5000,
	MessagesPerRoom:     1000000,
	MemoriesPerAgent:    100000,
	TasksPerRoom:        10000,
}

func (l Limits) withDefaults() Limits {
	orDefault := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	orDefault(&l.AgentsPerUser, DefaultLimits.AgentsPerUser)
	orDefault(&l.TagsPerAgent, DefaultLimits.TagsPerAgent)
	orDefault(&l.ChatsPerUser, DefaultLimits.ChatsPerUser)
	orDefault(&l.ParticipantsPerRoom, DefaultLimits.ParticipantsPerRoom)
	orDefault(&l.MessagesPerRoom, DefaultLimits.MessagesPerRoom)
	orDefault(&l.MemoriesPerAgent, DefaultLimits.MemoriesPerAgent)
	orDefault(&l.TasksPerRoom, DefaultLimits.TasksPerRoom)
	return l
}
