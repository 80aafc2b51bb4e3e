module github.com/setpoint-dev/setpoint/sdk

go 1.26
