import keras

model = keras.Sequential([keras.Input((4, 2)), keras.layers.LSTM(2)])
raise ValueError("could not find the training data in data/train.csv")
