from mcp_server_tinypy import main

main()
