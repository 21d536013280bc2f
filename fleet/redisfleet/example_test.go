package redisfleet_test

import (
	"context"
	"fmt"

	"github.com/agentstop/agentstop/fleet"
	"github.com/agentstop/agentstop/fleet/redisfleet"
	"github.com/agentstop/agentstop/middleware"
)

// A stage joins a Redis fleet; its runs carry a tenant label that selects
// them and keys shared budgets.
func ExampleNew() {
	ctx := context.Background()
	f, err := redisfleet.New(ctx, "redis://127.0.0.1:6379/0", redisfleet.WithPrefix("myapp:"))
	if err != nil {
		fmt.Println(err) // a malformed URL or option; an unreachable server is not an error (fail-open)
		return
	}
	defer f.Close(context.Background())
	stage, err := middleware.New("research", middleware.WithParticipant(fleet.Membership(f)))
	if err != nil {
		fmt.Println(err)
		return
	}
	_, run := stage.Start(ctx, middleware.WithLabels(map[string]string{"tenant": "acme"}))
	defer run.Finish(nil)
}

// An operator stops a tenant's runs across every process.
func ExampleControl_Stop() {
	c, err := redisfleet.NewControl("redis://127.0.0.1:6379/0")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	rep, err := c.Stop(context.Background(), fleet.StopRequest{
		Selector: fleet.Selector{Labels: map[string]string{"tenant": "acme"}},
		Reason:   "runaway spend, INC-42",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("stopped %d of %d\n", rep.Stopped, rep.Matched)
}

// URLs carry ACL credentials; errors and Redact never show them.
func ExampleCheckURL() {
	err := redisfleet.CheckURL("redis://app:s3cret@redis.internal:port")
	fmt.Println(err)
	fmt.Println(redisfleet.Redact("rediss://app:s3cret@redis.internal:6380/0"))
	// Output:
	// malformed redis URL: invalid port
	// rediss://xxxxx:xxxxx@redis.internal:6380/0
}
