package config

import (
	"strings"
	"testing"
)

func TestAdminAuthValidate(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		edit func(*Config)
		want string // a substring of the error; "" for none
	}{
		"off": {func(*Config) {}, ""},
		"roles without enabled": {func(c *Config) { c.AdminAuth.SuperUserRoles = []string{"ops"} },
			"admin_auth.enabled: must be true"},
		"no verifier": {func(c *Config) {
			c.AdminAuth = AdminAuth{Enabled: true, SuperUserRoles: []string{"ops"}}
		}, "admin_auth.enabled: needs auth.token"},
		"no roles": {func(c *Config) {
			c.AdminAuth.Enabled = true
			c.AdminTLS = TLS{CertFile: "c.pem", KeyFile: "k.pem", ClientCAFile: "ca.pem"}
		}, "admin_auth.super_user_roles: required"},
		"certificates": {func(c *Config) {
			c.AdminAuth = AdminAuth{Enabled: true, SuperUserRoles: []string{"ops"}}
			c.AdminTLS = TLS{CertFile: "c.pem", KeyFile: "k.pem", ClientCAFile: "ca.pem"}
		}, ""},
		"token and authorization's super-users": {func(c *Config) {
			c.AdminAuth.Enabled = true
			c.Auth.Token.SecretKey = "data:;base64,c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA=="
			c.Authorization = Authorization{Enabled: true, SuperUserRoles: []string{"admin"}}
		}, ""},
		"admin listener off": {func(c *Config) {
			c.AdminListen = AdminListenOff
			c.AdminAuth = AdminAuth{Enabled: true, SuperUserRoles: []string{"ops"}}
			c.AdminTLS = TLS{}
			c.Auth.Token.SecretKey = "data:;base64,c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA=="
		}, "admin_auth.enabled: admin_listen is off"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := Defaults()
			tc.edit(c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}
