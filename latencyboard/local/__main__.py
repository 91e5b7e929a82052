from latencyboard.local.runner import main

main()
