from mcp_server_standin import main

main()
