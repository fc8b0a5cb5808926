from flowtracer.main import main

main()
