package main

import (
	"fmt"
	"reflect"
	"strconv"

	as "github.com/aerospike/aerospike-client-go/v8"
	"github.com/aerospike/aerospike-client-go/v8/types"
)

// security drives a node with security on through the Go client's admin API: the default
// admin creates a role with exactly one privilege (the Go client undercounts that message's
// fields) and a user holding it; the user logs in, reads within the role's scope, is refused
// elsewhere, changes its own password and logs in with the new one.
func security(portText string) {
	port, err := strconv.Atoi(portText)
	if err != nil {
		fail("PORT is a number")
	}
	admin := login(port, "admin", "admin")
	defer admin.Close()
	if err := admin.GrantRoles(nil, "admin", []string{"read-write"}); err != nil {
		fail("grant read-write to admin: %v", err)
	}
	demo := as.Privilege{Code: as.Read, Namespace: "test", SetName: "demo"}
	if err := admin.CreateRole(nil, "go-demo-reader", []as.Privilege{demo}, []string{"127.0.0.1"}, 0, 0); err != nil {
		fail("create role: %v", err)
	}
	role, err := admin.QueryRole(nil, "go-demo-reader")
	if err != nil {
		fail("query role: %v", err)
	}
	if !reflect.DeepEqual(role.Privileges, []as.Privilege{demo}) || !reflect.DeepEqual(role.Whitelist, []string{"127.0.0.1"}) {
		fail("query role: %+v", role)
	}
	if err := admin.CreateUser(nil, "go-user", "go-password", []string{"go-demo-reader"}); err != nil {
		fail("create user: %v", err)
	}
	user, err := admin.QueryUser(nil, "go-user")
	if err != nil || !reflect.DeepEqual(user.Roles, []string{"go-demo-reader"}) {
		fail("query user: %+v, %v", user, err)
	}
	key, _ := as.NewKey("test", "demo", "go-security")
	if err := admin.Put(nil, key, as.BinMap{"v": 1}); err != nil {
		fail("admin put: %v", err)
	}
	reader := login(port, "go-user", "go-password")
	if record, err := reader.Get(nil, key); err != nil || record.Bins["v"] != 1 {
		fail("the user's get: %v, %v", record, err)
	}
	if err := reader.Put(nil, key, as.BinMap{"v": 2}); err == nil || !err.Matches(types.ROLE_VIOLATION) {
		fail("the user's put: want ROLE_VIOLATION, got %v", err)
	}
	other, _ := as.NewKey("test", "other", "go-security")
	if _, err := reader.Get(nil, other); err == nil || !err.Matches(types.ROLE_VIOLATION) {
		fail("the user's get outside its set: want ROLE_VIOLATION, got %v", err)
	}
	if err := reader.ChangePassword(nil, "go-user", "new-password"); err != nil {
		fail("change own password: %v", err)
	}
	reader.Close()
	login(port, "go-user", "new-password").Close()
	if _, err := as.NewClientWithPolicy(policyFor("go-user", "go-password"), "127.0.0.1", port); err == nil {
		fail("the old password still logs in")
	}
	fmt.Println("security ok")
}

func policyFor(user, password string) *as.ClientPolicy {
	policy := as.NewClientPolicy()
	policy.User = user
	policy.Password = password
	return policy
}

func login(port int, user, password string) *as.Client {
	client, err := as.NewClientWithPolicy(policyFor(user, password), "127.0.0.1", port)
	if err != nil {
		fail("log in as %s: %v", user, err)
	}
	return client
}
