print("xtalk")
