module github.com/airlock-dev/airlock

go 1.26.8
