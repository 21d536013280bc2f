package redisfleet

const childEnv = "REDISFLEET_TEST_CHILD"

func childMain() int { return 0 }
