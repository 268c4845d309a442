package route_test

import (
	"fmt"

	"github.com/sluicehq/sluice/core/route"
)

func ExampleHolder() {
	type limits struct{ maxPending int }
	list, err := route.NewList([]route.Entry[limits]{
		{Name: "iot", Match: "/ws/v2/producer/persistent/iot/**", Value: limits{100}},
		{Name: "default", Match: "/ws/v2/**", Value: limits{1000}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	h := route.NewHolder(list)

	for _, p := range []string{"/ws/v2/producer/persistent/iot/ns/t", "/ws/v2/consumer/persistent/a/b/c/sub", "/other"} {
		if e, ok := h.Match(p); ok {
			fmt.Println(p, "->", e.Name, e.Value.maxPending)
		} else {
			fmt.Println(p, "-> no route")
		}
	}
	// Output:
	// /ws/v2/producer/persistent/iot/ns/t -> iot 100
	// /ws/v2/consumer/persistent/a/b/c/sub -> default 1000
	// /other -> no route
}
