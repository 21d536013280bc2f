// Module render is the docs tool that draws docs/dashboard.png. It lives in
// its own module so that the product module (github.com/agentstop/agentstop)
// does not contain it; it uses the standard library only.
module github.com/agentstop/agentstop/dashboards/render

go 1.26.0
