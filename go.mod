module github.com/agentstop/agentstop

go 1.26.0

require go.yaml.in/yaml/v3 v3.0.6

require github.com/stretchr/testify v1.12.1
