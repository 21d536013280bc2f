module github.com/agentstop/agentstop/adapters/adk

go 1.26.0

require (
	github.com/agentstop/agentstop v0.1.0
	go.uber.org/goleak v1.3.0
)

require go.yaml.in/yaml/v3 v3.0.6 // indirect
